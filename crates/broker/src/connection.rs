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

use crate::dispatch::{handle_frame, Outcome};
use crate::server::BrokerContext;

const READ_BUFFER_BYTES: usize = 64 * 1024;

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
        let mut frame = BytesMut::zeroed(len);
        match tokio::time::timeout(idle, reader.read_exact(&mut frame)).await {
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
        match handle_frame(&ctx, peer, frame.freeze()).await {
            Outcome::Respond(bytes) => {
                if writer.write_all(&bytes).await.is_err() {
                    return;
                }
            }
            Outcome::NoResponse => {}
            Outcome::Close(reason) => {
                log::warn!("closing connection from {peer}: {reason}");
                return;
            }
        }
    }
}
