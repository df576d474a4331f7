//! One client connection: read a frame, dispatch it, write the answer, in
//! order. Like Kafka, a connection handles one request at a time, with one
//! exception: once a produce's records are appended and only its durability
//! wait is left, the next produce is read and appended meanwhile, so the
//! requests a client pipelines share fdatasyncs (see `PRODUCES_WAITING_MAX`).
//! Answers still leave in request order (a queue of the waiting ones), and
//! any other request is handled only after every earlier one is answered.
//! The stream is
//! TCP, or TLS over TCP once [`crate::tls`] has shaken hands: file ranges of
//! a fetch go out with sendfile on TCP, and through the TLS session (read
//! into memory in chunks) on TLS. While a request's body arrives, the
//! socket's wake threshold ([`crate::wake_threshold`]) has the kernel wake
//! the connection for large parts of it rather than for every segment.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use kafgres_wire::frame::{frame_body_len, FRAME_LEN_BYTES};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::sync::watch;

use std::sync::atomic::Ordering;

use std::os::fd::AsRawFd;

use tokio::io::Interest;
use tokio::net::tcp::OwnedWriteHalf;

use crate::acl::Identity;
use crate::config::Authentication;
use crate::context::BrokerContext;
use crate::dispatch::{handle_frame, Outcome};
use crate::listener::Endpoint;
use crate::metrics::{BrokerMetrics, ConnectionEntry};
use crate::quota::QuotaKey;
use crate::sasl::{Gate, SaslSession};
use crate::splice::ResponsePart;
use crate::wake_threshold::WakeThreshold;
use std::collections::VecDeque;

const READ_BUFFER_BYTES: usize = 64 * 1024;
/// How much of a file range a TLS connection reads into memory at a time.
const TLS_FILE_CHUNK_BYTES: usize = 256 * 1024;
const PRODUCE_KEY: i16 = 0;
const FETCH_KEY: i16 = 1;
const SASL_HANDSHAKE_KEY: i16 = 17;
const API_VERSIONS_KEY: i16 = 18;
const SASL_AUTHENTICATE_KEY: i16 = 36;

/// A connection's byte stream.
pub enum Transport {
    Plain(TcpStream),
    Tls(Box<crate::tls::ServerTlsStream>),
}

/// Where a connection came in and who it is before any request.
pub struct Accepted {
    pub peer: SocketAddr,
    /// Its listener's bound port (the connection table's listener).
    pub listener_port: u16,
    /// Its listener's endpoint (what Metadata tells it).
    pub endpoint: Arc<Endpoint>,
    /// Its listener's SASL requirement.
    pub authentication: Authentication,
    /// The role its TLS client certificate named (SSL listeners).
    pub certificate_identity: Option<Identity>,
}

pub async fn serve_connection(
    transport: Transport,
    accepted: Accepted,
    ctx: Arc<BrokerContext>,
    shutdown: watch::Receiver<bool>,
) {
    let peer = accepted.peer;
    let shares = Arc::clone(&ctx.shares);
    match transport {
        Transport::Plain(stream) => {
            let threshold = WakeThreshold::new(stream.as_raw_fd(), 0);
            let (reader, writer) = stream.into_split();
            serve(reader, ResponseWriter::Plain(writer), threshold, accepted, ctx, shutdown).await
        }
        Transport::Tls(stream) => {
            let socket = stream.get_ref().0.get_ref().as_raw_fd();
            let threshold = WakeThreshold::new(socket, crate::tls::HELD_BELOW_PLAINTEXT_MAX);
            let (reader, writer) = tokio::io::split(*stream);
            serve(reader, ResponseWriter::Tls(writer), threshold, accepted, ctx, shutdown).await
        }
    }
    // The share sessions this connection opened end with it.
    shares.connection_closed(peer);
}

async fn serve<R: AsyncRead + Unpin>(
    reader: R,
    mut writer: ResponseWriter,
    mut threshold: WakeThreshold,
    accepted: Accepted,
    ctx: Arc<BrokerContext>,
    mut shutdown: watch::Receiver<bool>,
) {
    let Accepted { peer, listener_port, endpoint, authentication, certificate_identity } = accepted;
    let mut reader = BufReader::with_capacity(READ_BUFFER_BYTES, reader);
    let metrics = ctx.config.metrics;
    let entry = metrics.open_connection(peer, listener_port, crate::now_ms());
    let tls = matches!(writer, ResponseWriter::Tls(_));
    let mut sasl = SaslSession::new(
        &authentication,
        ctx.config.internal_secret.clone(),
        tls,
        ctx.identities.get(),
        ctx.config.live.connections_max_reauth_ms(),
    )
    .with_delegation_tokens(std::sync::Arc::clone(&ctx.delegation_tokens));
    if let Some(identity) = certificate_identity {
        entry.set_principal(identity.role.as_bytes());
        sasl.open_as(identity);
    }
    // Produces whose records are appended and whose answers wait for their
    // durability, oldest first (see `PRODUCES_WAITING_MAX`).
    let mut waiting: VecDeque<Waiting> = VecDeque::new();
    loop {
        // Read at each request: a reload may change it.
        let idle = Duration::from_millis(ctx.config.live.connection_idle_ms_max());
        let frame_bytes_max = sasl.frame_bytes_max(ctx.config.live.frame_bytes_max());
        let authenticating = sasl.authenticating();
        // The next request is read while the waiting produces finish: their
        // answers go out, in order, as they become ready.
        let read = {
            let read = read_request(&mut reader, &mut threshold, &ctx, peer, idle, frame_bytes_max, authenticating);
            tokio::pin!(read);
            loop {
                tokio::select! {
                    biased;
                    _ = shutdown.changed() => {
                        // Answered before closing, as the shutdown promises:
                        // the flushers still run until every connection ends.
                        drain(&mut waiting, &mut writer, &entry, metrics, peer).await;
                        return;
                    }
                    outcome = next_answer(&mut waiting) => {
                        let Some(done) = waiting.pop_front() else { continue };
                        if send(&mut writer, &entry, metrics, peer, outcome, &done.sent).await.is_none() {
                            return;
                        }
                    }
                    read = &mut read => break read,
                }
            }
        };
        let Some(Request { frame, len, reserved: _reserved }) = read else {
            return;
        };
        let api_key = count_request(metrics, &entry, &frame);
        if api_key != Some(PRODUCE_KEY) {
            // Anything else sees every earlier request answered, as with one
            // request in progress at a time (a Fetch after a Produce reads
            // its records).
            if !drain(&mut waiting, &mut writer, &entry, metrics, peer).await {
                return;
            }
        } else if waiting.len() >= PRODUCES_WAITING_MAX {
            let Some(oldest) = waiting.pop_front() else { return };
            let outcome = oldest.answer.await;
            if send(&mut writer, &entry, metrics, peer, outcome, &oldest.sent).await.is_none() {
                return;
            }
        }
        // Produce's time in the broker, from its last byte read to its
        // answer written (durability wait included): what a client's send
        // latency owes the broker, the rest being the client's and the
        // network's (`kafgres.broker_metrics`).
        let sent = Sent { request_bytes: (FRAME_LEN_BYTES + len) as u64, api_key, started: std::time::Instant::now() };
        // Authentication first: SASL requests are answered here, and nothing
        // else reaches dispatch before the client has authenticated.
        let frame = match sasl.gate(ctx.catalog.as_ref(), peer, frame.freeze()).await {
            Gate::Dispatch(frame) => frame,
            Gate::Respond(bytes) => {
                // Nothing waits during authentication, but the order
                // should not depend on it: a raw SASL v0 token whose first
                // bytes read as Produce's key is not drained above.
                if !drain(&mut waiting, &mut writer, &entry, metrics, peer).await {
                    return;
                }
                if send(&mut writer, &entry, metrics, peer, Outcome::Respond(bytes), &sent).await.is_none() {
                    return;
                }
                if let Some(principal) = sasl.principal() {
                    entry.set_principal(principal.as_bytes());
                }
                continue;
            }
            Gate::RespondAndClose(bytes, reason) => {
                entry.record_request(sent.request_bytes, bytes.len() as u64);
                let failed = ctx.failed_logins.record(peer.ip(), sasl.attempted_user());
                match failed.log_with_unlogged {
                    Some(0) => log::warn!("closing connection from {peer}: {reason}"),
                    Some(n) => log::warn!(
                        "closing connection from {peer}: {reason} ({n} more failed logins from {} since the last \
                         such line)",
                        peer.ip()
                    ),
                    None => {}
                }
                // Held before the answer, as Kafka holds it: a password
                // guesser waits longer with every failure.
                tokio::select! {
                    _ = shutdown.changed() => return,
                    _ = tokio::time::sleep(failed.delay) => {}
                }
                let _ = writer.write_all(&bytes).await;
                writer.shutdown().await;
                return;
            }
            Gate::Close(reason) => {
                log::warn!("closing connection from {peer}: {reason}");
                return;
            }
        };
        // Quotas (KIP-219): the answer carries the throttle time, and the
        // connection reads nothing more from the client until it has passed.
        let quota_client = ctx.quotas.active().then(|| header_client_id(&frame).to_owned());
        let user = sasl.identity().role.as_str();
        let throttle = match (&quota_client, api_key) {
            (Some(client_id), Some(PRODUCE_KEY)) => {
                ctx.quotas.record(QuotaKey::ProducerByteRate, user, client_id, FRAME_LEN_BYTES + len)
            }
            // Already over its rate: the fetch is answered empty, as Kafka does.
            (Some(client_id), Some(FETCH_KEY)) => ctx.quotas.record(QuotaKey::ConsumerByteRate, user, client_id, 0),
            _ => Duration::ZERO,
        };
        let throttle_ms = i32::try_from(throttle.as_millis()).unwrap_or(i32::MAX);
        // request_percentage: the time of each request is measured on the
        // connection's thread; a client already over its quota gets the
        // throttle in this answer, and the time this request took counts
        // towards muting it after (the model of the Fetch byte rate).
        let timed = quota_client.is_some() && api_key.is_some_and(request_quota_applies);
        let request_throttle = match (&quota_client, timed) {
            (Some(client_id), true) => ctx.quotas.record_request_time(user, client_id, Duration::ZERO),
            _ => Duration::ZERO,
        };
        let throttles = crate::dispatch::Throttles {
            bytes_ms: throttle_ms,
            request_ms: i32::try_from(request_throttle.as_millis()).unwrap_or(i32::MAX),
        };
        let mut mute = throttle.max(request_throttle);
        let handled = handle_frame(&ctx, peer, sasl.principal(), sasl.identity(), &endpoint, throttles, frame);
        let (outcome, on_thread) = if timed {
            let (outcome, spent) = OnThread::new(handled).await;
            (outcome, Some(spent))
        } else {
            (handled.await, None)
        };
        match outcome {
            Outcome::Later(answer) => waiting.push_back(Waiting { answer, sent }),
            // After the waiting ones, in request order.
            Outcome::Respond(bytes) if !waiting.is_empty() => {
                waiting.push_back(Waiting { answer: Box::pin(std::future::ready(Outcome::Respond(bytes))), sent })
            }
            outcome => {
                let Some(bytes_out) = send(&mut writer, &entry, metrics, peer, outcome, &sent).await else {
                    return;
                };
                if let (Some(client_id), Some(FETCH_KEY), true) = (&quota_client, api_key, throttle.is_zero()) {
                    mute = ctx.quotas.record(QuotaKey::ConsumerByteRate, user, client_id, bytes_out);
                }
            }
        }
        if let (Some(spent), Some(client_id)) = (on_thread, &quota_client) {
            mute = mute.max(ctx.quotas.record_request_time(user, client_id, spent));
        }
        if !mute.is_zero() {
            // The throttled answer goes out first, then the connection mutes.
            if !drain(&mut waiting, &mut writer, &entry, metrics, peer).await {
                return;
            }
            metrics.throttled_requests.fetch_add(1, Ordering::Relaxed);
            tokio::select! {
                _ = shutdown.changed() => return,
                _ = tokio::time::sleep(mute) => {}
            }
        }
    }
}

/// How many produces of one connection may wait for their durability at
/// once. While one waits for its fdatasync the connection reads and appends
/// the next, so a single client's requests share flushes as concurrent
/// clients' do (with one request in progress at a time, as Kafka serves a
/// connection, a client's throughput is its requests in flight divided by
/// the flush time). Bounded so a client pipelining without limit (librdkafka
/// without idempotence allows a million requests in flight) holds a bounded
/// number of answers; its further requests wait in the socket.
const PRODUCES_WAITING_MAX: usize = 64;

/// A request read off the socket, with its share of the broker's budget.
struct Request<'a> {
    frame: BytesMut,
    len: usize,
    reserved: tokio::sync::SemaphorePermit<'a>,
}

/// A produce whose answer is not ready yet.
struct Waiting {
    answer: std::pin::Pin<Box<dyn std::future::Future<Output = Outcome> + Send>>,
    sent: Sent,
}

/// What a request's answer is counted with.
struct Sent {
    request_bytes: u64,
    api_key: Option<i16>,
    started: std::time::Instant,
}

/// The oldest waiting produce's answer, once ready (never, with none waiting).
async fn next_answer(waiting: &mut VecDeque<Waiting>) -> Outcome {
    match waiting.front_mut() {
        Some(oldest) => oldest.answer.as_mut().await,
        None => std::future::pending().await,
    }
}

/// Sends every waiting answer, in order; false when the connection is to close.
async fn drain(
    waiting: &mut VecDeque<Waiting>,
    writer: &mut ResponseWriter,
    entry: &ConnectionEntry<'_>,
    metrics: &BrokerMetrics,
    peer: SocketAddr,
) -> bool {
    while let Some(oldest) = waiting.pop_front() {
        let outcome = oldest.answer.await;
        if send(writer, entry, metrics, peer, outcome, &oldest.sent).await.is_none() {
            return false;
        }
    }
    true
}

/// Reads one request frame: its length prefix (waiting at most `idle` for
/// it), room for it in the broker-wide budget, then its body. `None` when
/// the connection is to close (the reason is logged).
async fn read_request<'a, R: AsyncRead + Unpin>(
    reader: &mut BufReader<R>,
    threshold: &mut WakeThreshold,
    ctx: &'a BrokerContext,
    peer: SocketAddr,
    idle: Duration,
    frame_bytes_max: usize,
    authenticating: bool,
) -> Option<Request<'a>> {
    let mut prefix = [0u8; FRAME_LEN_BYTES];
    match tokio::time::timeout(idle, reader.read_exact(&mut prefix)).await {
        Ok(Ok(_)) => {}
        Ok(Err(_)) => return None, // closed by the client, or reset
        Err(_) => {
            log::info!("closing connection from {peer}: idle for {idle:?} (kafgres.connections_max_idle_ms)");
            return None;
        }
    }
    let len = match frame_body_len(prefix, frame_bytes_max) {
        Ok(len) => len,
        Err(e) => {
            let stage = if authenticating { " before SASL authentication" } else { "" };
            log::warn!("closing connection from {peer}{stage}: {e}");
            return None;
        }
    };
    // Room in the broker-wide budget first, then the buffer: while the
    // budget is spent this connection reads nothing more (its bytes wait
    // in the socket, and TCP slows the client).
    let reserved = ctx.request_memory.reserve(FRAME_LEN_BYTES + len).await?;
    // Filled straight from the socket buffer: no zeroing of a buffer
    // that is about to be overwritten (a produce can be megabytes).
    let mut frame = BytesMut::with_capacity(len);
    let body = async {
        while frame.len() < len {
            let wanted = len - frame.len();
            // Woken once much of the rest is there, not at every segment.
            threshold.expect(wanted.saturating_sub(reader.buffer().len()));
            let wanted = wanted as u64;
            if (&mut *reader).take(wanted).read_buf(&mut frame).await? == 0 {
                return Err(std::io::Error::from(std::io::ErrorKind::UnexpectedEof));
            }
        }
        Ok(())
    };
    let read = tokio::time::timeout(idle, body).await;
    threshold.reset();
    match read {
        Ok(Ok(_)) => Some(Request { frame, len, reserved }),
        Ok(Err(e)) => {
            log::info!("connection from {peer} closed mid-request ({len} bytes expected): {e}");
            None
        }
        Err(_) => {
            log::warn!("closing connection from {peer}: a {len}-byte request stalled for {idle:?}");
            None
        }
    }
}

/// Sends one request's answer (a deferred one once ready) and counts it;
/// the bytes sent, or `None` when the connection is to close.
async fn send(
    writer: &mut ResponseWriter,
    entry: &ConnectionEntry<'_>,
    metrics: &BrokerMetrics,
    peer: SocketAddr,
    outcome: Outcome,
    sent: &Sent,
) -> Option<usize> {
    let outcome = match outcome {
        Outcome::Later(answer) => answer.await,
        ready => ready,
    };
    let bytes_out = match outcome {
        Outcome::Respond(bytes) => {
            entry.record_request(sent.request_bytes, bytes.len() as u64);
            writer.write_all(&bytes).await.ok()?;
            bytes.len()
        }
        Outcome::RespondParts { parts, woken_at } => {
            let bytes_out: usize = parts.iter().map(ResponsePart::len).sum();
            entry.record_request(sent.request_bytes, bytes_out as u64);
            if let Err(e) = writer.write_parts(parts).await {
                log::info!("closing connection from {peer}: sending a response failed: {e}");
                return None;
            }
            if let Some(woken_at) = woken_at {
                metrics.record_fetch_wake_time(woken_at.elapsed());
            }
            bytes_out
        }
        Outcome::NoResponse => {
            entry.record_request(sent.request_bytes, 0);
            0
        }
        Outcome::Close(reason) => {
            log::warn!("closing connection from {peer}: {reason}");
            return None;
        }
        Outcome::Later(_) => {
            log::error!("closing connection from {peer}: an answer deferred twice (a broker bug)");
            return None;
        }
    };
    if let Some(key) = sent.api_key {
        metrics.api.record_time(key, sent.started.elapsed());
        if key == PRODUCE_KEY {
            metrics.record_produce_time(sent.started.elapsed());
        }
    }
    Some(bytes_out)
}

/// Whether the request quota counts an API: not ApiVersions and the SASL
/// APIs, which a client needs before it can authenticate (Kafka exempts them).
fn request_quota_applies(api_key: i16) -> bool {
    !matches!(api_key, SASL_HANDSHAKE_KEY | API_VERSIONS_KEY | SASL_AUTHENTICATE_KEY)
}

/// A request's future, with the time spent in its polls: the time it took on
/// the broker's threads, not the time it waited (for data, a flush, the
/// catalog).
struct OnThread<F> {
    inner: std::pin::Pin<Box<F>>,
    spent: Duration,
}

impl<F: std::future::Future> OnThread<F> {
    fn new(inner: F) -> OnThread<F> {
        OnThread { inner: Box::pin(inner), spent: Duration::ZERO }
    }
}

impl<F: std::future::Future> std::future::Future for OnThread<F> {
    type Output = (F::Output, Duration);

    fn poll(mut self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<Self::Output> {
        let started = std::time::Instant::now();
        let polled = self.inner.as_mut().poll(cx);
        self.spent += started.elapsed();
        polled.map(|output| (output, self.spent))
    }
}

/// The request header's client id (after key, version and correlation id:
/// an int16-length string); empty when null or not UTF-8.
fn header_client_id(frame: &[u8]) -> &str {
    header_client_id_bytes(frame).and_then(|id| std::str::from_utf8(id).ok()).unwrap_or("")
}

/// The client id's bytes in a request header (every header version puts
/// it at the same place), `None` when null or cut short.
fn header_client_id_bytes(frame: &[u8]) -> Option<&[u8]> {
    let len = frame.get(8..10).map(|l| i16::from_be_bytes([l[0], l[1]]))?;
    usize::try_from(len).ok().and_then(|len| frame.get(10..10 + len))
}

/// The sending half of a connection.
enum ResponseWriter {
    Plain(OwnedWriteHalf),
    Tls(tokio::io::WriteHalf<crate::tls::ServerTlsStream>),
}

impl ResponseWriter {
    async fn write_all(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        match self {
            ResponseWriter::Plain(w) => w.write_all(bytes).await,
            // Flushed: TLS records wait in the session until then.
            ResponseWriter::Tls(w) => {
                w.write_all(bytes).await?;
                w.flush().await
            }
        }
    }

    async fn write_parts(&mut self, parts: Vec<ResponsePart>) -> std::io::Result<()> {
        match self {
            ResponseWriter::Plain(w) => write_parts(w, parts).await,
            ResponseWriter::Tls(w) => {
                write_parts_through(w, parts).await?;
                w.flush().await
            }
        }
    }

    async fn shutdown(&mut self) {
        let _ = match self {
            ResponseWriter::Plain(w) => w.shutdown().await,
            ResponseWriter::Tls(w) => w.shutdown().await,
        };
    }
}

/// The open file behind a range of a fetch answer.
fn os_file(range: &kafgres_log::ReadSlice) -> std::io::Result<&std::fs::File> {
    range
        .file
        .as_ref()
        .and_then(|f| f.as_std_file())
        .ok_or_else(|| std::io::Error::other("a file range without an OS file"))
}

/// A range that ends before its length: the file shrank under the answer,
/// whose length prefix is already sent, so the connection must close.
fn ended_early(range: &kafgres_log::ReadSlice) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::UnexpectedEof,
        format!("{} ended before the range being sent", range.path.display()),
    )
}

/// Writes a response's parts through a stream that is not a socket (TLS):
/// file ranges are read from the page cache in chunks and encrypted.
async fn write_parts_through<W: tokio::io::AsyncWrite + Unpin>(
    writer: &mut W,
    parts: Vec<ResponsePart>,
) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    let mut chunk = Vec::new();
    for part in parts {
        match part {
            ResponsePart::Bytes(bytes) => writer.write_all(&bytes).await?,
            ResponsePart::File(range) => {
                let file = os_file(&range)?;
                let mut position = range.position;
                let end = range.position + range.len;
                while position < end {
                    let want = ((end - position) as usize).min(TLS_FILE_CHUNK_BYTES);
                    chunk.resize(want, 0);
                    let read = file.read_at(&mut chunk, position)?;
                    if read == 0 {
                        return Err(ended_early(&range));
                    }
                    writer.write_all(&chunk[..read]).await?;
                    position += read as u64;
                }
            }
        }
    }
    Ok(())
}

/// Writes a response's parts in order: bytes with write, file ranges with
/// sendfile (the kernel copies page cache to socket; nothing passes through
/// user space). A range that ends early (the file shrank) fails the response:
/// its length prefix is already sent, so the connection must close.
async fn write_parts(writer: &mut OwnedWriteHalf, mut parts: Vec<ResponsePart>) -> std::io::Result<()> {
    if let [ResponsePart::Bytes(bytes)] = parts.as_mut_slice() {
        return writer.write_all(bytes).await;
    }
    // Corked while the parts go out, so the small header and the file data
    // leave in full segments instead of a tiny packet first (the socket is
    // TCP_NODELAY); uncorking sends the rest at once.
    let fd = AsRef::<tokio::net::TcpStream>::as_ref(writer).as_raw_fd();
    set_cork(fd, true);
    let result = write_parts_corked(writer, parts).await;
    set_cork(fd, false);
    result
}

fn set_cork(fd: std::os::fd::RawFd, on: bool) {
    let value: libc::c_int = on.into();
    // SAFETY: a plain setsockopt on an open socket; failure only costs packets.
    unsafe {
        libc::setsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_CORK,
            (&value as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
}

async fn write_parts_corked(writer: &mut OwnedWriteHalf, parts: Vec<ResponsePart>) -> std::io::Result<()> {
    for part in parts {
        match part {
            ResponsePart::Bytes(bytes) => writer.write_all(&bytes).await?,
            ResponsePart::File(range) => {
                let file = os_file(&range)?;
                let socket: &tokio::net::TcpStream = writer.as_ref();
                let mut offset = range.position as libc::off_t;
                let end = offset + range.len as libc::off_t;
                while offset < end {
                    let want = (end - offset) as usize;
                    let sent = socket
                        .async_io(Interest::WRITABLE, || {
                            // SAFETY: both descriptors are open for the call
                            // (the stream and the Arc'd file are borrowed).
                            let n = unsafe { libc::sendfile(socket.as_raw_fd(), file.as_raw_fd(), &mut offset, want) };
                            if n < 0 {
                                Err(std::io::Error::last_os_error())
                            } else {
                                Ok(n as usize)
                            }
                        })
                        .await?;
                    if sent == 0 {
                        return Err(ended_early(&range));
                    }
                }
            }
        }
    }
    Ok(())
}

/// Counts a request by API and version and, on a connection's first request, records the
/// client id from its header (api key, version, correlation id, then the
/// client id as a nullable int16-length string in every header version).
/// Returns the API key, if the frame has one.
fn count_request(metrics: &BrokerMetrics, entry: &ConnectionEntry<'_>, frame: &[u8]) -> Option<i16> {
    metrics.requests.fetch_add(1, Ordering::Relaxed);
    let key = frame.get(0..2).map(|k| i16::from_be_bytes([k[0], k[1]]))?;
    if let Some(v) = frame.get(2..4) {
        metrics.api.count_request(key, i16::from_be_bytes([v[0], v[1]]));
    }
    match key {
        PRODUCE_KEY => metrics.produce_requests.fetch_add(1, Ordering::Relaxed),
        FETCH_KEY => metrics.fetch_requests.fetch_add(1, Ordering::Relaxed),
        _ => 0,
    };
    if entry.needs_client_id() {
        if let Some(id) = header_client_id_bytes(frame) {
            entry.set_client_id(id);
        }
    }
    Some(key)
}
