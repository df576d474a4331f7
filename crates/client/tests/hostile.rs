//! Interrupts, deadlines and servers that do not follow the protocol.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::RawFd;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use common::{records, TestBroker};
use kafgres_client::{Client, ClientConfig, ClientError, Interest, PollWait, Ready, Wait};

/// A waiter that, once `after` has passed, interrupts instead of waiting:
/// what a statement cancel does to the Postgres host's waiter.
struct InterruptAfter {
    at: Instant,
    waits: usize,
}

impl Wait for InterruptAfter {
    fn wait(&mut self, fd: RawFd, interest: Interest, deadline: Option<Instant>) -> Result<Ready, ClientError> {
        self.waits += 1;
        if Instant::now() >= self.at {
            return Err(ClientError::Interrupted("canceling statement due to user request".into()));
        }
        // Wait in slices so the interrupt is noticed promptly, as a latch would.
        let slice = Instant::now() + Duration::from_millis(20);
        let until = deadline.map_or(slice, |d| d.min(slice));
        match PollWait.wait(fd, interest, Some(until))? {
            Ready::TimedOut if deadline.is_some_and(|d| Instant::now() >= d) => Ok(Ready::TimedOut),
            _ => Ok(Ready::Ready),
        }
    }
}

#[test]
fn an_interrupting_waiter_aborts_a_long_poll_promptly() {
    let broker = TestBroker::start();
    let mut setup = broker.client();
    setup.create_topic("quiet", 1, &[]).unwrap();
    setup.produce("quiet", 0, &records("q", 1)).unwrap();

    // No interrupt until the long poll below has started (a loaded machine
    // may take long to connect and answer the first fetch).
    let waiter = InterruptAfter { at: Instant::now() + Duration::from_secs(3600), waits: 0 };
    let mut client = Client::connect(broker.addr(), "interrupted", waiter).unwrap();
    // Works normally before the interrupt.
    assert_eq!(client.fetch("quiet", 0, 0, 1 << 20, Duration::ZERO).unwrap().records.len(), 1);
    client.waiter_mut().at = Instant::now() + Duration::from_millis(300);
    client.waiter_mut().waits = 0;
    let started = Instant::now();
    let err = client.fetch("quiet", 0, 1, 1 << 20, Duration::from_secs(30)).unwrap_err();
    let took = started.elapsed();
    assert!(matches!(err, ClientError::Interrupted(_)), "{err}");
    assert!(took < Duration::from_secs(3), "the interrupt took {took:?}");
    assert!(client.waiter_mut().waits > 1);
    // The response may still arrive: the connection is not reused.
    assert!(client.is_broken());
    assert!(matches!(client.metadata(None), Err(ClientError::Broken)));
}

/// A one-connection server that reads one request and answers with whatever
/// `respond` builds from its correlation id.
fn fake_server(respond: impl FnOnce(i32, &mut TcpStream) + Send + 'static) -> (SocketAddr, JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let handle = std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        let mut len = [0u8; 4];
        stream.read_exact(&mut len).unwrap();
        let mut request = vec![0u8; i32::from_be_bytes(len) as usize];
        stream.read_exact(&mut request).unwrap();
        let correlation_id = i32::from_be_bytes(request[4..8].try_into().unwrap());
        respond(correlation_id, &mut stream);
    });
    (addr, handle)
}

fn frame(correlation_id: i32, body: &[u8]) -> Vec<u8> {
    let mut out = ((body.len() + 5) as i32).to_be_bytes().to_vec();
    out.extend_from_slice(&correlation_id.to_be_bytes());
    out.push(0); // response header tagged fields
    out.extend_from_slice(body);
    out
}

fn short_timeout() -> ClientConfig {
    ClientConfig { request_timeout: Duration::from_millis(500), ..ClientConfig::default() }
}

fn list_groups_against(respond: impl FnOnce(i32, &mut TcpStream) + Send + 'static) -> ClientError {
    let (addr, server) = fake_server(respond);
    let mut client = Client::connect_with(addr, "hostile", PollWait, short_timeout()).unwrap();
    let err = client.list_groups().unwrap_err();
    server.join().unwrap();
    err
}

#[test]
fn an_oversized_frame_is_refused_before_allocating() {
    let err = list_groups_against(|_, s| {
        s.write_all(&i32::MAX.to_be_bytes()).unwrap();
        std::thread::sleep(Duration::from_millis(100));
    });
    assert!(
        matches!(err, ClientError::FrameTooLarge { api: "ListGroups", len, bytes_max } if len == i32::MAX as usize && bytes_max == 64 << 20),
        "{err}"
    );
    let err = list_groups_against(|_, s| s.write_all(&(-5i32).to_be_bytes()).unwrap());
    assert!(matches!(err, ClientError::Protocol(_)), "{err}");
}

#[test]
fn an_impossible_array_count_is_a_protocol_error() {
    // ListGroups v4: throttle, error code, then 2^32 - 2 groups in 1 byte.
    let err = list_groups_against(|id, s| {
        s.write_all(&frame(id, &[0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f, 0])).unwrap()
    });
    match err {
        ClientError::Protocol(m) => assert!(m.contains("ListGroups v4: malformed response"), "{m}"),
        other => panic!("{other}"),
    }
}

#[test]
fn a_wrong_correlation_id_is_a_protocol_error() {
    let err = list_groups_against(|id, s| s.write_all(&frame(id + 1, &[0, 0, 0, 0, 0, 0, 1, 0])).unwrap());
    match err {
        ClientError::Protocol(m) => assert!(m.contains("correlation id"), "{m}"),
        other => panic!("{other}"),
    }
}

#[test]
fn a_connection_closed_mid_frame_is_an_io_error() {
    let err = list_groups_against(|id, s| s.write_all(&frame(id, &[0, 0, 0, 0, 0, 0, 1, 0])[..7]).unwrap());
    assert!(matches!(err, ClientError::Io { api: "ListGroups", .. }), "{err}");
}

#[test]
fn a_silent_server_times_out_at_the_deadline() {
    let started = Instant::now();
    let err = list_groups_against(|_, _| std::thread::sleep(Duration::from_millis(1500)));
    let took = started.elapsed();
    assert!(matches!(err, ClientError::Timeout { api: "ListGroups" }), "{err}");
    assert!(took >= Duration::from_millis(450), "{took:?}");
}

#[test]
fn random_bodies_give_errors_not_panics() {
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    for round in 0..200 {
        let mut body = Vec::new();
        for _ in 0..(round % 40) {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            body.push(seed as u8);
        }
        let err = list_groups_against(move |id, s| s.write_all(&frame(id, &body)).unwrap());
        assert!(matches!(err, ClientError::Protocol(_) | ClientError::Kafka { .. }), "round {round}: {err}");
    }
}
