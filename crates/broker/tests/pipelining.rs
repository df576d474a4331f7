//! One connection's produces overlap their durability waits: a client that
//! sends requests without waiting for answers (librdkafka, the Java client)
//! has the next produce appended while the previous one waits for its
//! fdatasync. What must not change: the answers leave in request order, the
//! records get offsets in request order, and any other request (a Fetch, an
//! ApiVersions) is handled only once every earlier request is answered.

mod common;

use common::{batch, create_topic, decode_records, expected, fetch_request, produce_request, records, TestBroker};
use kafgres_wire::error_code;
use kafka_protocol::messages::{ApiVersionsRequest, FetchRequest, ProduceRequest};

/// More than the broker keeps waiting per connection (64), so the test also
/// covers a full queue.
const REQUESTS: usize = 100;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_produces_are_answered_in_order_and_a_fetch_after_them_reads_them_all() {
    let broker = TestBroker::start().await;
    let mut client = broker.client().await;
    let topic = "pipelined";
    create_topic(&mut client, topic, 1).await;

    // All sent before any answer is read; acks=all, acks=1 and a refused
    // one (unknown partition) mixed, as their answers could be ready in
    // another order than they were asked.
    let mut asked = Vec::new();
    let mut sent_records = Vec::new();
    for i in 0..REQUESTS {
        let (acks, partition) = match i % 10 {
            3 => (1, 0),
            7 => (-1, 5),
            _ => (-1, 0),
        };
        let tagged = records(&format!("r{i}"), 1 + i % 3);
        let request = produce_request(topic, partition, acks, batch(&tagged));
        if partition == 0 {
            sent_records.extend(tagged);
        }
        asked.push((client.send(9, &request).await, partition));
    }
    let fetch_id = client.send(12, &fetch_request(common::TopicRef::Name(topic), 0, 0, 16 << 20, 0, 1)).await;

    let mut next_offset = 0i64;
    for (i, (correlation_id, partition)) in asked.into_iter().enumerate() {
        let response = client.receive::<ProduceRequest>(9, correlation_id).await;
        let answer = &response.responses[0].partition_responses[0];
        if partition == 0 {
            assert_eq!((answer.error_code, answer.base_offset), (0, next_offset), "request {i}");
            next_offset += (1 + i % 3) as i64;
        } else {
            assert_eq!(answer.error_code, error_code::UNKNOWN_TOPIC_OR_PARTITION, "request {i}");
        }
    }
    let fetched = client.receive::<FetchRequest>(12, fetch_id).await;
    let partition = common::single_partition(fetched);
    assert_eq!((partition.error_code, partition.high_watermark), (0, next_offset), "every produce is visible");
    let bytes = partition.records.expect("records");
    assert_eq!(decode_records(&bytes), expected(&sent_records, 0));
    broker.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_of_another_api_waits_for_the_produces_before_it() {
    let broker = TestBroker::start().await;
    let mut client = broker.client().await;
    let topic = "then-versions";
    create_topic(&mut client, topic, 1).await;
    let first = client.send(9, &produce_request(topic, 0, -1, batch(&records("a", 2)))).await;
    let versions = client.send(0, &ApiVersionsRequest::default()).await;
    let second = client.send(9, &produce_request(topic, 0, -1, batch(&records("b", 1)))).await;
    // acks=0 in between: no answer, but its records take their place.
    client.send(9, &produce_request(topic, 0, 0, batch(&records("c", 1)))).await;
    let third = client.send(9, &produce_request(topic, 0, -1, batch(&records("d", 1)))).await;

    let answer = client.receive::<ProduceRequest>(9, first).await;
    assert_eq!(answer.responses[0].partition_responses[0].base_offset, 0);
    assert_eq!(client.receive::<ApiVersionsRequest>(0, versions).await.error_code, 0);
    let answer = client.receive::<ProduceRequest>(9, second).await;
    assert_eq!(answer.responses[0].partition_responses[0].base_offset, 2);
    let answer = client.receive::<ProduceRequest>(9, third).await;
    assert_eq!(answer.responses[0].partition_responses[0].base_offset, 4, "after the acks=0 record");
    assert_eq!(broker.log_end(topic, 0), 5);
    broker.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn produces_waiting_at_shutdown_are_answered_before_the_connection_closes() {
    let broker = TestBroker::start().await;
    let mut client = broker.client().await;
    let topic = "at-shutdown";
    create_topic(&mut client, topic, 1).await;
    let mut asked = Vec::new();
    for i in 0..20 {
        asked.push(client.send(9, &produce_request(topic, 0, -1, batch(&records(&format!("s{i}"), 1)))).await);
    }
    // Shut down while some of them may still wait for their flush, others
    // may not be read yet: the connection closes after answering every
    // produce it appended (as durable), and reads no more.
    let shutdown = tokio::spawn(broker.shutdown());
    let mut answered = 0i64;
    for correlation_id in asked {
        let Ok(answer) = client.try_receive::<ProduceRequest>(9, correlation_id).await else { break };
        let partition = &answer.responses[0].partition_responses[0];
        assert_eq!((partition.error_code, partition.base_offset), (0, answered));
        answered += 1;
    }
    let (dir, catalog) = shutdown.await.expect("shutdown completes");
    let broker = TestBroker::start_on(dir, catalog).await;
    assert_eq!(broker.log_end(topic, 0), answered, "every appended record was answered, none more");
    broker.broker.shutdown().await;
}
