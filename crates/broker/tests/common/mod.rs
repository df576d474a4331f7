//! Shared harness for the broker's integration tests: a broker in a temporary
//! directory, a minimal Kafka client over loopback TCP (every read bounded by
//! [`IO_TIMEOUT`], so no test can hang), request builders and record helpers.
//!
//! Requests and responses are encoded with the `kafka-protocol` crate; record
//! batches with `kafgres_record::build` and decoded with
//! `kafka_protocol::records::RecordBatchDecoder` (uncompressed batches need
//! none of the crate's compression features).

#![allow(dead_code)] // each test binary uses a different part of the harness

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafgres_broker::{Broker, BrokerConfig, MemoryCatalog};
use kafgres_record::build::{encode_batch, NewRecord, ProducerStamp};
use kafgres_record::{set_base_offset, set_partition_leader_epoch};
use kafgres_wire::ApiKey;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::fetch_response::PartitionData;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::list_offsets_response::ListOffsetsPartitionResponse;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::produce_response::PartitionProduceResponse;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable, Request, StrBytes};
use kafka_protocol::records::RecordBatchDecoder;
use tempfile::TempDir;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use uuid::Uuid;

pub mod scram;
pub mod tls;
pub mod txn;

/// The longest any single read (or connect) may take before the test fails.
pub const IO_TIMEOUT: Duration = Duration::from_secs(10);
/// Responses larger than this are treated as a broken stream, not allocated.
const RESPONSE_BYTES_MAX: usize = 64 << 20;
pub const CLIENT_ID: &str = "kafgres-tests";

// ---------------------------------------------------------------- broker

/// A broker with its own log directory and catalog.
pub struct TestBroker {
    pub dir: TempDir,
    pub catalog: Arc<MemoryCatalog>,
    pub broker: Broker,
}

impl TestBroker {
    pub async fn start() -> TestBroker {
        TestBroker::start_on(tempfile::tempdir().expect("tempdir"), Arc::default()).await
    }

    /// Starts on `dir` with the topics `catalog` recorded: what the extension
    /// does at boot, and how the tests restart a broker.
    pub async fn start_on(dir: TempDir, catalog: Arc<MemoryCatalog>) -> TestBroker {
        let config = BrokerConfig::for_tests(dir.path().to_path_buf());
        TestBroker::start_with(dir, catalog, config).await
    }

    /// Starts with a config the test adjusted (a follower, a leader epoch...).
    pub async fn start_with(dir: TempDir, catalog: Arc<MemoryCatalog>, config: BrokerConfig) -> TestBroker {
        let broker = Broker::start(config, catalog.clone(), catalog.snapshot()).await.expect("broker starts");
        TestBroker { dir, catalog, broker }
    }

    pub fn addr(&self) -> SocketAddr {
        self.broker.local_addr()
    }

    pub async fn client(&self) -> Client {
        Client::connect(self.addr()).await
    }

    /// The partition's log end offset, read inside the broker (it includes
    /// records not yet flushed, unlike the high watermark).
    pub fn log_end(&self, topic: &str, partition: i32) -> i64 {
        let t = self.broker.context().topics.get(topic).expect("topic exists");
        t.partition(partition).expect("partition exists").log_end_offset()
    }

    pub async fn shutdown(self) -> (TempDir, Arc<MemoryCatalog>) {
        self.broker.shutdown().await;
        (self.dir, self.catalog)
    }
}

// ---------------------------------------------------------------- credentials

/// The verifier `CREATE ROLE … PASSWORD '<password>'` stores with
/// `password_encryption = 'scram-sha-256'` (4096 iterations), computed here
/// from the password as PostgreSQL computes it.
pub fn scram_credential(password: &str, salt: &[u8]) -> kafgres_broker::sasl::scram::ScramCredential {
    use base64::engine::general_purpose::STANDARD as BASE64;
    use base64::Engine;
    use hmac::{KeyInit, Mac};
    use sha2::Digest;
    const ITERATIONS: u32 = 4096;
    let mac = |key: &[u8], data: &[u8]| -> Vec<u8> {
        let mut m = <hmac::Hmac<sha2::Sha256> as KeyInit>::new_from_slice(key).expect("any key length");
        m.update(data);
        m.finalize().into_bytes().to_vec()
    };
    // RFC 5802's Hi(): PBKDF2-HMAC-SHA-256, one block.
    let mut block = salt.to_vec();
    block.extend_from_slice(&1u32.to_be_bytes());
    let mut u = mac(password.as_bytes(), &block);
    let mut salted = u.clone();
    for _ in 1..ITERATIONS {
        u = mac(password.as_bytes(), &u);
        salted.iter_mut().zip(&u).for_each(|(o, x)| *o ^= x);
    }
    let verifier = format!(
        "SCRAM-SHA-256${ITERATIONS}:{}${}:{}",
        BASE64.encode(salt),
        BASE64.encode(sha2::Sha256::digest(mac(&salted, b"Client Key"))),
        BASE64.encode(mac(&salted, b"Server Key"))
    );
    kafgres_broker::sasl::scram::ScramCredential::from_verifier(&verifier).expect("a verifier")
}

// ---------------------------------------------------------------- client

/// The client's byte stream: TCP, or TLS over TCP (`tests/tls.rs`).
pub trait ClientStream: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send {}
impl<S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send> ClientStream for S {}

pub struct Client {
    pub stream: Box<dyn ClientStream>,
    /// The client's end of the connection.
    pub local_addr: SocketAddr,
    next_correlation_id: i32,
}

/// A whole request frame: length prefix, request header (v1, or v2 with an
/// empty tagged-field section), body.
pub fn raw_frame(key: i16, version: i16, correlation_id: i32, header_version: i16, body: &[u8]) -> Vec<u8> {
    let header_bytes = 10 + CLIENT_ID.len() + usize::from(header_version >= 2);
    let mut out = Vec::with_capacity(4 + header_bytes + body.len());
    out.put_i32((header_bytes + body.len()) as i32);
    out.put_i16(key);
    out.put_i16(version);
    out.put_i32(correlation_id);
    out.put_i16(CLIENT_ID.len() as i16);
    out.put_slice(CLIENT_ID.as_bytes());
    if header_version >= 2 {
        out.put_u8(0);
    }
    out.put_slice(body);
    out
}

pub fn request_frame<R: Encodable>(key: ApiKey, version: i16, correlation_id: i32, body: &R) -> Vec<u8> {
    let mut encoded = BytesMut::new();
    body.encode(&mut encoded, version).expect("request encodes");
    raw_frame(key as i16, version, correlation_id, key.request_header_version(version), &encoded)
}

impl Client {
    pub async fn connect(addr: SocketAddr) -> Client {
        let stream = tokio::time::timeout(IO_TIMEOUT, TcpStream::connect(addr))
            .await
            .expect("connect timed out")
            .expect("connect");
        Client::over(stream)
    }

    /// A client on an open TCP connection.
    pub fn over(stream: TcpStream) -> Client {
        stream.set_nodelay(true).expect("nodelay");
        let local_addr = stream.local_addr().expect("local address");
        Client { stream: Box::new(stream), local_addr, next_correlation_id: 1 }
    }

    /// A client on a stream already set up (a TLS session).
    pub fn over_stream(stream: Box<dyn ClientStream>, local_addr: SocketAddr) -> Client {
        Client { stream, local_addr, next_correlation_id: 1 }
    }

    /// Connects from `source` (another loopback address: a second client host).
    pub async fn connect_from(source: std::net::IpAddr, addr: SocketAddr) -> Client {
        let socket = tokio::net::TcpSocket::new_v4().expect("socket");
        socket.bind(SocketAddr::new(source, 0)).expect("bind the source address");
        let stream =
            tokio::time::timeout(IO_TIMEOUT, socket.connect(addr)).await.expect("connect timed out").expect("connect");
        Client::over(stream)
    }

    pub fn next_correlation_id(&mut self) -> i32 {
        self.next_correlation_id += 1;
        self.next_correlation_id
    }

    pub async fn send_raw(&mut self, bytes: &[u8]) {
        let write = async {
            self.stream.write_all(bytes).await?;
            self.stream.flush().await
        };
        tokio::time::timeout(IO_TIMEOUT, write).await.expect("write timed out").expect("write");
    }

    /// Sends a request; returns its correlation id.
    pub async fn send<R: Request>(&mut self, version: i16, request: &R) -> i32 {
        let correlation_id = self.next_correlation_id();
        let frame = request_frame(api_key::<R>(), version, correlation_id, request);
        self.send_raw(&frame).await;
        correlation_id
    }

    /// Reads one response frame (without its length prefix).
    pub async fn read_frame(&mut self) -> Bytes {
        self.try_read_frame().await.unwrap_or_else(|e| panic!("{e}"))
    }

    pub async fn try_read_frame(&mut self) -> Result<Bytes, String> {
        let mut prefix = [0u8; 4];
        self.read_exact_timed(&mut prefix).await?;
        let len = i32::from_be_bytes(prefix);
        if !(4..=RESPONSE_BYTES_MAX as i32).contains(&len) {
            return Err(format!("response length {len}"));
        }
        let mut frame = vec![0u8; len as usize];
        self.read_exact_timed(&mut frame).await?;
        Ok(Bytes::from(frame))
    }

    async fn read_exact_timed(&mut self, buf: &mut [u8]) -> Result<(), String> {
        match tokio::time::timeout(IO_TIMEOUT, self.stream.read_exact(buf)).await {
            Err(_) => Err(format!("no response within {IO_TIMEOUT:?}")),
            Ok(Err(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                Err("the broker closed the connection instead of answering".into())
            }
            Ok(Err(e)) => Err(format!("reading the response: {e}")),
            Ok(Ok(_)) => Ok(()),
        }
    }

    /// Reads the response to `correlation_id`, checks its header and that the
    /// body decodes exactly, with no bytes left over.
    pub async fn receive<R: Request>(&mut self, version: i16, correlation_id: i32) -> R::Response {
        self.try_receive::<R>(version, correlation_id)
            .await
            .unwrap_or_else(|e| panic!("{:?} v{version}: {e}", api_key::<R>()))
    }

    pub async fn try_receive<R: Request>(&mut self, version: i16, correlation_id: i32) -> Result<R::Response, String> {
        let mut frame = self.try_read_frame().await?;
        if frame.get_i32() != correlation_id {
            return Err("wrong correlation id".into());
        }
        if api_key::<R>().response_header_version(version) >= 1 && frame.get_u8() != 0 {
            return Err("tagged fields in the response header".into());
        }
        let response = R::Response::decode(&mut frame, version).map_err(|e| format!("cannot decode: {e}"))?;
        match frame.remaining() {
            0 => Ok(response),
            n => Err(format!("{n} bytes left after the response")),
        }
    }

    pub async fn call<R: Request>(&mut self, version: i16, request: &R) -> R::Response {
        let correlation_id = self.send(version, request).await;
        self.receive::<R>(version, correlation_id).await
    }

    pub async fn try_call<R: Request>(&mut self, version: i16, request: &R) -> Result<R::Response, String> {
        let correlation_id = self.send(version, request).await;
        self.try_receive::<R>(version, correlation_id).await
    }

    /// Asserts that the broker closes the connection without sending anything.
    pub async fn expect_closed(&mut self) {
        let mut buf = [0u8; 64];
        match tokio::time::timeout(IO_TIMEOUT, self.stream.read(&mut buf)).await {
            Err(_) => panic!("the broker kept the connection open"),
            Ok(Ok(0)) | Ok(Err(_)) => {}
            Ok(Ok(n)) => panic!("expected the connection to close, got {n} bytes: {:?}", &buf[..n]),
        }
    }
}

pub fn api_key<R: Request>() -> ApiKey {
    ApiKey::try_from(R::KEY).expect("known api key")
}

// ---------------------------------------------------------------- requests

pub fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_owned()))
}

pub fn creatable(topic: &str, partitions: i32, replication_factor: i16) -> CreatableTopic {
    CreatableTopic::default()
        .with_name(name(topic))
        .with_num_partitions(partitions)
        .with_replication_factor(replication_factor)
}

/// Creates a topic with CreateTopics v7 and returns its id.
pub async fn create_topic(client: &mut Client, topic: &str, partitions: i32) -> Uuid {
    let request = CreateTopicsRequest::default().with_topics(vec![creatable(topic, partitions, 1)]);
    let response = client.call(7, &request).await;
    let result = &response.topics[0];
    assert_eq!(result.error_code, 0, "create {topic}: {:?}", result.error_message);
    result.topic_id
}

pub fn metadata_request(topics: Option<&[&str]>, allow_auto_topic_creation: bool) -> MetadataRequest {
    MetadataRequest::default()
        .with_topics(
            topics.map(|t| t.iter().map(|n| MetadataRequestTopic::default().with_name(Some(name(n)))).collect()),
        )
        .with_allow_auto_topic_creation(allow_auto_topic_creation)
}

pub fn produce_request(topic: &str, partition: i32, acks: i16, records: Vec<u8>) -> ProduceRequest {
    let data = PartitionProduceData::default().with_index(partition).with_records(Some(Bytes::from(records)));
    ProduceRequest::default()
        .with_acks(acks)
        .with_timeout_ms(30_000)
        .with_topic_data(vec![TopicProduceData::default().with_name(name(topic)).with_partition_data(vec![data])])
}

/// Produces one partition's records with acks != 0 and returns its answer.
pub async fn produce(
    client: &mut Client,
    version: i16,
    topic: &str,
    partition: i32,
    acks: i16,
    records: Vec<u8>,
) -> PartitionProduceResponse {
    let response = client.call(version, &produce_request(topic, partition, acks, records)).await;
    assert_eq!(response.responses.len(), 1);
    assert_eq!(response.responses[0].name, name(topic));
    let mut partitions = response.responses.into_iter().next().expect("one topic").partition_responses;
    assert_eq!(partitions.len(), 1);
    let p = partitions.remove(0);
    assert_eq!(p.index, partition);
    p
}

/// Which topic a fetch names: by name (Fetch v4-12) or by id (v13+).
#[derive(Clone, Copy)]
pub enum TopicRef<'a> {
    Name(&'a str),
    Id(Uuid),
}

pub fn fetch_request(
    topic: TopicRef<'_>,
    partition: i32,
    offset: i64,
    partition_max_bytes: i32,
    max_wait_ms: i32,
    min_bytes: i32,
) -> FetchRequest {
    let p = FetchPartition::default()
        .with_partition(partition)
        .with_fetch_offset(offset)
        .with_partition_max_bytes(partition_max_bytes);
    let t = match topic {
        TopicRef::Name(n) => FetchTopic::default().with_topic(name(n)),
        TopicRef::Id(id) => FetchTopic::default().with_topic_id(id),
    };
    FetchRequest::default()
        .with_max_wait_ms(max_wait_ms)
        .with_min_bytes(min_bytes)
        .with_max_bytes(50 << 20)
        .with_topics(vec![t.with_partitions(vec![p])])
}

/// Fetches one partition (without waiting) and returns its answer.
pub async fn fetch(
    client: &mut Client,
    version: i16,
    topic: TopicRef<'_>,
    partition: i32,
    offset: i64,
    partition_max_bytes: i32,
) -> PartitionData {
    let response = client.call(version, &fetch_request(topic, partition, offset, partition_max_bytes, 0, 1)).await;
    single_partition(response)
}

pub fn single_partition(response: FetchResponse) -> PartitionData {
    assert_eq!(response.error_code, 0);
    assert_eq!(response.responses.len(), 1);
    let mut partitions = response.responses.into_iter().next().expect("one topic").partitions;
    assert_eq!(partitions.len(), 1);
    partitions.remove(0)
}

pub fn list_offset_request(topic: &str, partition: i32, timestamp: i64) -> ListOffsetsRequest {
    let p = ListOffsetsPartition::default().with_partition_index(partition).with_timestamp(timestamp);
    let t = ListOffsetsTopic::default().with_name(name(topic)).with_partitions(vec![p]);
    ListOffsetsRequest::default().with_replica_id(BrokerId(-1)).with_topics(vec![t])
}

pub async fn list_offset(
    client: &mut Client,
    version: i16,
    topic: &str,
    partition: i32,
    timestamp: i64,
) -> ListOffsetsPartitionResponse {
    let response = client.call(version, &list_offset_request(topic, partition, timestamp)).await;
    assert_eq!(response.topics.len(), 1);
    assert_eq!(response.topics[0].name, name(topic));
    let mut partitions = response.topics.into_iter().next().expect("one topic").partitions;
    assert_eq!(partitions.len(), 1);
    partitions.remove(0)
}

/// A topic's config overrides as DescribeConfigs v4 reports them (source
/// DYNAMIC_TOPIC_CONFIG), by name.
pub async fn topic_configs(client: &mut Client, topic: &str) -> std::collections::BTreeMap<String, String> {
    use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
    let resource = DescribeConfigsResource::default()
        .with_resource_type(2)
        .with_resource_name(StrBytes::from_string(topic.to_owned()))
        .with_configuration_keys(None);
    let response = client.call(4, &DescribeConfigsRequest::default().with_resources(vec![resource])).await;
    assert_eq!(response.results[0].error_code, 0, "describe {topic}: {:?}", response.results[0].error_message);
    response.results[0]
        .configs
        .iter()
        .filter(|c| c.config_source == 1)
        .map(|c| (c.name.to_string(), c.value.as_ref().map(|v| v.to_string()).unwrap_or_default()))
        .collect()
}

// ---------------------------------------------------------------- records

pub const TIMESTAMP_BASE_MS: i64 = 1_700_000_000_000;

/// `count` records `<tag>-k<i>` / `<tag>-v<i>`, each with two headers (one of
/// them null-valued); every third record has a null value.
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

pub fn batch(records: &[NewRecord]) -> Vec<u8> {
    encode_batch(records, ProducerStamp::NONE)
}

/// A produced batch as the broker stores and serves it: base offset assigned,
/// leader epoch 0 stamped, everything else (CRC included) unchanged.
pub fn as_stored(batch: &[u8], base_offset: i64) -> Vec<u8> {
    let mut b = batch.to_vec();
    set_base_offset(&mut b, base_offset);
    set_partition_leader_epoch(&mut b, 0);
    b
}

/// What a fetch should return for `records` stored from `base_offset`.
pub fn expected(records: &[NewRecord], base_offset: i64) -> Vec<(i64, NewRecord)> {
    (base_offset..).zip(records.iter().cloned()).collect()
}

/// Decodes fetched record bytes (whole uncompressed v2 batches): offsets and records.
pub fn decode_records(bytes: &Bytes) -> Vec<(i64, NewRecord)> {
    let sets = RecordBatchDecoder::decode_all(&mut bytes.clone()).expect("fetched batches decode");
    let to_vec = |b: Option<Bytes>| b.map(|b| b.to_vec());
    let records = sets.into_iter().flat_map(|set| set.records);
    records
        .map(|r| {
            let headers = r.headers.iter().map(|(k, v)| (k.to_string(), to_vec(v.clone()))).collect();
            (r.offset, NewRecord { key: to_vec(r.key), value: to_vec(r.value), headers, timestamp_ms: r.timestamp })
        })
        .collect()
}
