//! One client connection: read a frame, dispatch it, write the answer, in
//! order. Like Kafka, a connection has one request in progress at a time, so
//! responses leave in request order without a reorder buffer.

use std::net::SocketAddr;
use std::sync::Arc;

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
    loop {
        let mut prefix = [0u8; FRAME_LEN_BYTES];
        let read = tokio::select! {
            _ = shutdown.changed() => return,
            read = reader.read_exact(&mut prefix) => read,
        };
        if read.is_err() {
            return; // closed by the client, or reset
        }
        let len = match frame_body_len(prefix, ctx.config.frame_bytes_max) {
            Ok(len) => len,
            Err(e) => {
                log::warn!("closing connection from {peer}: {e}");
                return;
            }
        };
        let mut frame = BytesMut::zeroed(len);
        if let Err(e) = reader.read_exact(&mut frame).await {
            log::info!("connection from {peer} closed mid-request ({len} bytes expected): {e}");
            return;
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
