//! One client connection: read a frame, dispatch it, write the answer, in
//! order. Like Kafka, a connection has one request in progress at a time, so
//! responses leave in request order without a reorder buffer.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use kafgres_wire::frame::{frame_body_len, FRAME_LEN_BYTES};
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::sync::watch;

use std::sync::atomic::Ordering;

use crate::dispatch::{handle_frame, Outcome};
use crate::metrics::{BrokerMetrics, ConnectionEntry};
use crate::server::BrokerContext;

const READ_BUFFER_BYTES: usize = 64 * 1024;
const PRODUCE_KEY: i16 = 0;
const FETCH_KEY: i16 = 1;

pub async fn serve_connection(
    stream: TcpStream,
    peer: SocketAddr,
    ctx: Arc<BrokerContext>,
    mut shutdown: watch::Receiver<bool>,
) {
    let _ = stream.set_nodelay(true);
    let (reader, mut writer) = stream.into_split();
    let mut reader = BufReader::with_capacity(READ_BUFFER_BYTES, reader);
    let idle = Duration::from_millis(ctx.config.connection_idle_ms_max);
    let metrics = ctx.config.metrics;
    let entry = metrics.open_connection(peer, crate::now_ms());
    loop {
        let mut prefix = [0u8; FRAME_LEN_BYTES];
        let read = tokio::select! {
            _ = shutdown.changed() => return,
            read = tokio::time::timeout(idle, reader.read_exact(&mut prefix)) => read,
        };
        match read {
            Ok(Ok(_)) => {}
            Ok(Err(_)) => return, // closed by the client, or reset
            Err(_) => {
                log::info!("closing connection from {peer}: idle for {idle:?} (kafgres.connections_max_idle_ms)");
                return;
            }
        }
        let len = match frame_body_len(prefix, ctx.config.frame_bytes_max) {
            Ok(len) => len,
            Err(e) => {
                log::warn!("closing connection from {peer}: {e}");
                return;
            }
        };
        // Filled straight from the socket buffer: no zeroing of a buffer
        // that is about to be overwritten (a produce can be megabytes).
        let mut frame = BytesMut::with_capacity(len);
        let body = async {
            while frame.len() < len {
                let wanted = (len - frame.len()) as u64;
                if (&mut reader).take(wanted).read_buf(&mut frame).await? == 0 {
                    return Err(std::io::Error::from(std::io::ErrorKind::UnexpectedEof));
                }
            }
            Ok(())
        };
        match tokio::time::timeout(idle, body).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => {
                log::info!("connection from {peer} closed mid-request ({len} bytes expected): {e}");
                return;
            }
            Err(_) => {
                log::warn!("closing connection from {peer}: a {len}-byte request stalled for {idle:?}");
                return;
            }
        }
        count_request(metrics, &entry, &frame);
        match handle_frame(&ctx, peer, frame.freeze()).await {
            Outcome::Respond(bytes) => {
                entry.record_request((FRAME_LEN_BYTES + len) as u64, bytes.len() as u64);
                if writer.write_all(&bytes).await.is_err() {
                    return;
                }
            }
            Outcome::NoResponse => entry.record_request((FRAME_LEN_BYTES + len) as u64, 0),
            Outcome::Close(reason) => {
                log::warn!("closing connection from {peer}: {reason}");
                return;
            }
        }
    }
}

/// Counts a request by API and, on a connection's first request, records the
/// client id from its header (api key, version, correlation id, then the
/// client id as a nullable int16-length string in every header version).
fn count_request(metrics: &BrokerMetrics, entry: &ConnectionEntry<'_>, frame: &[u8]) {
    metrics.requests.fetch_add(1, Ordering::Relaxed);
    let Some(key) = frame.get(0..2).map(|k| i16::from_be_bytes([k[0], k[1]])) else { return };
    match key {
        PRODUCE_KEY => metrics.produce_requests.fetch_add(1, Ordering::Relaxed),
        FETCH_KEY => metrics.fetch_requests.fetch_add(1, Ordering::Relaxed),
        _ => 0,
    };
    if entry.needs_client_id() {
        if let Some(len) = frame.get(8..10).map(|l| i16::from_be_bytes([l[0], l[1]])) {
            if let Some(id) = usize::try_from(len).ok().and_then(|len| frame.get(10..10 + len)) {
                entry.set_client_id(id);
            }
        }
    }
}
