//! The idempotent producer: InitProducerId hands out ids unique across
//! restarts; Produce checks each producer batch against the partition's
//! producer state atomically with the append: a retried batch is answered
//! with its original offsets and not written again, a gap is
//! error_code::OUT_OF_ORDER_SEQUENCE_NUMBER, an older epoch error_code::INVALID_PRODUCER_EPOCH, and a
//! client-side epoch bump (KIP-360) restarts sequences at 0. The state
//! survives a restart (from the snapshot, or rebuilt from batch headers).

mod common;

use common::{create_topic, decode_records, fetch, produce, records, Client, TestBroker, TopicRef};
use kafgres_record::build::{encode_batch, ProducerStamp};
use kafgres_record::rewrite_crc;
use kafgres_wire::error_code;
use kafka_protocol::messages::produce_response::PartitionProduceResponse;
use kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse, ProducerId, TransactionalId};
use kafka_protocol::protocol::StrBytes;

async fn init_producer_id(
    client: &mut Client,
    version: i16,
    transactional_id: Option<&str>,
    current: (i64, i16),
) -> InitProducerIdResponse {
    let request = InitProducerIdRequest::default()
        .with_transactional_id(transactional_id.map(|t| TransactionalId(StrBytes::from_string(t.to_owned()))))
        .with_transaction_timeout_ms(60_000)
        .with_producer_id(ProducerId(current.0))
        .with_producer_epoch(current.1);
    client.call(version, &request).await
}

/// A batch of `count` records from producer `id` at `epoch`, first sequence `seq`.
fn producer_batch(tag: &str, count: usize, id: i64, epoch: i16, seq: i32) -> Vec<u8> {
    encode_batch(&records(tag, count), ProducerStamp { producer_id: id, producer_epoch: epoch, base_sequence: seq })
}

async fn send(client: &mut Client, topic: &str, batch: Vec<u8>) -> PartitionProduceResponse {
    produce(client, 9, topic, 0, -1, batch).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn init_producer_id_hands_out_fresh_ids() {
    let broker = TestBroker::start().await;
    let mut client = broker.client().await;
    let mut seen = Vec::new();
    for version in 0..=5i16 {
        let r = init_producer_id(&mut client, version, None, (-1, -1)).await;
        assert_eq!((r.error_code, r.producer_epoch), (0, 0), "v{version}: {r:?}");
        seen.push(r.producer_id.0);
    }
    // As in Kafka 4.x, a non-transactional request carrying its current id and
    // epoch still gets a new id with epoch 0 (idempotent producers bump their
    // epoch themselves).
    let last = *seen.last().expect("ids");
    let r = init_producer_id(&mut client, 5, None, (last, 0)).await;
    assert_eq!((r.error_code, r.producer_epoch), (0, 0));
    seen.push(r.producer_id.0);
    let mut unique = seen.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), seen.len(), "ids repeat: {seen:?}");

    // A transactional id gets its own producer id (crates/broker/tests/transactions.rs).
    let r = init_producer_id(&mut client, 4, Some("txn-1"), (-1, -1)).await;
    assert_eq!((r.error_code, r.producer_epoch), (0, 0));
    assert!(!seen.contains(&r.producer_id.0));
    let r = init_producer_id(&mut client, 4, Some(""), (-1, -1)).await;
    assert_eq!(r.error_code, error_code::INVALID_REQUEST);
    drop(client);

    // A restarted broker never hands out an id again.
    let (dir, catalog) = broker.shutdown().await;
    let broker = TestBroker::start_on(dir, catalog).await;
    let mut client = broker.client().await;
    let r = init_producer_id(&mut client, 4, None, (-1, -1)).await;
    assert_eq!(r.error_code, 0);
    assert!(seen.iter().all(|id| *id < r.producer_id.0), "{} after {seen:?}", r.producer_id.0);
    broker.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sequences_duplicates_and_epochs() {
    let broker = TestBroker::start().await;
    let mut client = broker.client().await;
    let topic = "idempotent";
    create_topic(&mut client, topic, 1).await;
    let id = init_producer_id(&mut client, 4, None, (-1, -1)).await.producer_id.0;

    let first = send(&mut client, topic, producer_batch("a", 3, id, 0, 0)).await;
    assert_eq!((first.error_code, first.base_offset), (0, 0));
    let second = send(&mut client, topic, producer_batch("b", 2, id, 0, 3)).await;
    assert_eq!((second.error_code, second.base_offset), (0, 3));
    assert_eq!(broker.log_end(topic, 0), 5);

    // Retries of either batch: success with the original offsets, nothing written.
    for (batch, base_offset) in [(producer_batch("a", 3, id, 0, 0), 0), (producer_batch("b", 2, id, 0, 3), 3)] {
        let retry = send(&mut client, topic, batch).await;
        assert_eq!((retry.error_code, retry.base_offset), (0, base_offset), "{retry:?}");
        assert_eq!(broker.log_end(topic, 0), 5, "a duplicate was written");
    }

    // A gap (sequence 6 instead of 5), and a batch overlapping the last one.
    for seq in [6, 4] {
        let gap = send(&mut client, topic, producer_batch("gap", 1, id, 0, seq)).await;
        assert_eq!((gap.error_code, gap.base_offset), (error_code::OUT_OF_ORDER_SEQUENCE_NUMBER, -1), "seq {seq}");
    }
    assert_eq!(broker.log_end(topic, 0), 5);

    // KIP-360: the client bumps its epoch and restarts at sequence 0; a new
    // epoch must start at 0.
    let bad_bump = send(&mut client, topic, producer_batch("c", 1, id, 1, 5)).await;
    assert_eq!(bad_bump.error_code, error_code::OUT_OF_ORDER_SEQUENCE_NUMBER);
    let bumped = send(&mut client, topic, producer_batch("c", 1, id, 1, 0)).await;
    assert_eq!((bumped.error_code, bumped.base_offset), (0, 5));
    // The old epoch is fenced, even for a retry of one of its batches.
    for (batch, what) in [(producer_batch("b", 2, id, 0, 3), "retry"), (producer_batch("d", 1, id, 0, 5), "next")] {
        let stale = send(&mut client, topic, batch).await;
        assert_eq!((stale.error_code, stale.base_offset), (error_code::INVALID_PRODUCER_EPOCH, -1), "{what}");
    }
    assert_eq!(broker.log_end(topic, 0), 6);

    // Producers are independent; one without state may start anywhere.
    let other = init_producer_id(&mut client, 4, None, (-1, -1)).await.producer_id.0;
    let late = send(&mut client, topic, producer_batch("e", 1, other, 0, 42)).await;
    assert_eq!((late.error_code, late.base_offset), (0, 6));

    // A transactional batch outside a transaction is refused; several
    // producer batches in one partition's records are refused as Kafka
    // refuses them.
    let mut transactional = producer_batch("t", 1, id, 1, 1);
    transactional[21..23].copy_from_slice(&0x10i16.to_be_bytes());
    rewrite_crc(&mut transactional);
    assert_eq!(send(&mut client, topic, transactional).await.error_code, error_code::INVALID_TXN_STATE);
    let mut two = producer_batch("f", 1, id, 1, 1);
    two.extend(producer_batch("g", 1, id, 1, 2));
    assert_eq!(send(&mut client, topic, two).await.error_code, error_code::INVALID_RECORD);
    assert_eq!(broker.log_end(topic, 0), 7);

    let fetched = fetch(&mut client, 11, TopicRef::Name(topic), 0, 0, 1 << 20).await;
    let keys: Vec<String> = decode_records(&fetched.records.expect("records"))
        .into_iter()
        .map(|(offset, r)| format!("{offset}:{}", String::from_utf8_lossy(&r.key.unwrap_or_default())))
        .collect();
    assert_eq!(keys, ["0:a-k0", "1:a-k1", "2:a-k2", "3:b-k0", "4:b-k1", "5:c-k0", "6:e-k0"]);
    broker.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn producer_state_survives_a_restart() {
    // Restart with the snapshot written at shutdown, and without it (the
    // state is then rebuilt from the batch headers in the log).
    for keep_snapshots in [true, false] {
        let broker = TestBroker::start().await;
        let mut client = broker.client().await;
        let topic = "restarted";
        create_topic(&mut client, topic, 1).await;
        let id = init_producer_id(&mut client, 4, None, (-1, -1)).await.producer_id.0;
        assert_eq!(send(&mut client, topic, producer_batch("a", 2, id, 0, 0)).await.base_offset, 0);
        assert_eq!(send(&mut client, topic, producer_batch("b", 3, id, 0, 2)).await.base_offset, 2);
        drop(client);
        let (dir, catalog) = broker.shutdown().await;
        let partition_dir = dir.path().join(format!("{topic}-0"));
        if !keep_snapshots {
            for entry in std::fs::read_dir(&partition_dir).expect("partition dir") {
                let path = entry.expect("entry").path();
                if path.extension().is_some_and(|e| e == "snapshot") {
                    std::fs::remove_file(&path).expect("remove snapshot");
                }
            }
        }

        let broker = TestBroker::start_on(dir, catalog).await;
        let mut client = broker.client().await;
        let retry = send(&mut client, topic, producer_batch("b", 3, id, 0, 2)).await;
        assert_eq!((retry.error_code, retry.base_offset), (0, 2), "snapshots kept: {keep_snapshots}");
        assert_eq!(broker.log_end(topic, 0), 5, "the retry was written again");
        let gap = send(&mut client, topic, producer_batch("c", 1, id, 0, 6)).await;
        assert_eq!(gap.error_code, error_code::OUT_OF_ORDER_SEQUENCE_NUMBER);
        let next = send(&mut client, topic, producer_batch("c", 1, id, 0, 5)).await;
        assert_eq!((next.error_code, next.base_offset), (0, 5));
        let after = send(&mut client, topic, producer_batch("d", 1, id, 0, 6)).await;
        assert_eq!((after.error_code, after.base_offset), (0, 6));
        broker.broker.shutdown().await;
    }
}
