//! The Prometheus endpoint (`kafgres.metrics_port`): `GET /metrics` over
//! HTTP/1.1 on its own listener, answered in the text exposition format from
//! the data plane's state ([`families`]), with no SQL.
//!
//! It owns the HTTP side only: one request per connection, a bounded head
//! (8 KiB, 10 s), at most [`SCRAPES_AT_ONCE`] connections served at once (more
//! are closed at accept), the scrape rendered on a blocking thread so a
//! broker with thousands of partitions never holds up the async workers. It
//! must not count anything itself: every figure comes from the counters the
//! data plane already keeps, so a scrape costs no request anything.

pub mod exposition;
pub mod families;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Semaphore};

pub use exposition::{Exposition, Kind};

use crate::context::BrokerContext;
use crate::listener::SecurityProtocol;

/// Scrape connections served at once.
pub const SCRAPES_AT_ONCE: usize = 8;
/// Longest request head read.
const HEAD_BYTES_MAX: usize = 8 << 10;
/// How long a client may take to send its request head.
const HEAD_TIMEOUT: Duration = Duration::from_secs(10);

/// Families the host adds to each scrape (the extension: its SQL bridge's
/// positions, read from shared memory). Must not block or call into Postgres.
pub trait HostMetrics: Send + Sync {
    fn write(&self, out: &mut Exposition);
}

/// Where the endpoint listens, and what the host adds.
#[derive(Clone)]
pub struct MetricsEndpoint {
    pub listen: SocketAddr,
    pub host: Option<Arc<dyn HostMetrics>>,
}

impl std::fmt::Debug for MetricsEndpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetricsEndpoint").field("listen", &self.listen).field("host", &self.host.is_some()).finish()
    }
}

/// What the endpoint serves from: the broker and its listeners (to name a
/// connection's listener).
pub(crate) struct Scraped {
    pub ctx: Arc<BrokerContext>,
    pub listeners: Vec<(SecurityProtocol, SocketAddr)>,
    pub host: Option<Arc<dyn HostMetrics>>,
}

/// Serves scrapes on `listener` until `shutdown`.
pub(crate) async fn serve(listener: TcpListener, scraped: Scraped, mut shutdown: watch::Receiver<bool>) {
    let scraped = Arc::new(scraped);
    let slots = Arc::new(Semaphore::new(SCRAPES_AT_ONCE));
    while let Some((stream, peer)) = crate::server::next_connection(&listener, &mut shutdown, "metrics endpoint").await
    {
        // Over the bound the connection is closed at once: a scraper retries
        // on its next interval.
        let Ok(slot) = Arc::clone(&slots).try_acquire_owned() else {
            log::debug!("metrics endpoint: refusing {peer}: {SCRAPES_AT_ONCE} scrapes in progress");
            continue;
        };
        let scraped = Arc::clone(&scraped);
        tokio::spawn(async move {
            if let Err(e) = answer(stream, &scraped).await {
                log::debug!("metrics endpoint: {peer}: {e}");
            }
            drop(slot);
        });
    }
}

/// What a request head asks for.
#[derive(Debug, PartialEq, Eq)]
enum Wanted {
    Metrics,
    NotFound,
    MethodNotAllowed,
    BadRequest,
}

fn parse_head(head: &[u8]) -> Wanted {
    let Some(line) = head.split(|&b| b == b'\n').next() else { return Wanted::BadRequest };
    let Ok(line) = std::str::from_utf8(line) else { return Wanted::BadRequest };
    let mut parts = line.trim_end_matches('\r').split(' ');
    let (Some(method), Some(target), Some(version)) = (parts.next(), parts.next(), parts.next()) else {
        return Wanted::BadRequest;
    };
    if !version.starts_with("HTTP/1.") {
        return Wanted::BadRequest;
    }
    if method != "GET" {
        return Wanted::MethodNotAllowed;
    }
    match target.split('?').next() {
        Some("/metrics") => Wanted::Metrics,
        _ => Wanted::NotFound,
    }
}

async fn answer(mut stream: TcpStream, scraped: &Arc<Scraped>) -> std::io::Result<()> {
    let mut head = Vec::with_capacity(1024);
    let read_head = async {
        let mut buf = [0u8; 1024];
        while !head.windows(4).any(|w| w == b"\r\n\r\n") {
            if head.len() >= HEAD_BYTES_MAX {
                return Ok(false);
            }
            let n = stream.read(&mut buf).await?;
            if n == 0 {
                return Err(std::io::Error::from(std::io::ErrorKind::UnexpectedEof));
            }
            head.extend_from_slice(&buf[..n]);
        }
        Ok::<bool, std::io::Error>(true)
    };
    let complete = tokio::time::timeout(HEAD_TIMEOUT, read_head)
        .await
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "request head not sent in time"))??;
    let wanted = if complete { parse_head(&head) } else { Wanted::BadRequest };
    let (status, content_type, body) = match wanted {
        Wanted::Metrics => {
            let scraped = Arc::clone(scraped);
            let body = tokio::task::spawn_blocking(move || {
                families::render(&scraped.ctx, &scraped.listeners, scraped.host.as_deref())
            })
            .await
            .map_err(std::io::Error::other)?;
            ("200 OK", "text/plain; version=0.0.4; charset=utf-8", body)
        }
        Wanted::NotFound => ("404 Not Found", "text/plain; charset=utf-8", "Kafgres serves /metrics only\n".into()),
        Wanted::MethodNotAllowed => ("405 Method Not Allowed", "text/plain; charset=utf-8", "GET only\n".into()),
        Wanted::BadRequest => ("400 Bad Request", "text/plain; charset=utf-8", "bad request\n".into()),
    };
    let allow = if wanted == Wanted::MethodNotAllowed { "Allow: GET\r\n" } else { "" };
    let response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n{allow}Connection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(response.as_bytes()).await?;
    stream.write_all(body.as_bytes()).await?;
    stream.shutdown().await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_get_of_metrics_is_served() {
        assert_eq!(parse_head(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"), Wanted::Metrics);
        assert_eq!(parse_head(b"GET /metrics?name[]=x HTTP/1.0\r\n\r\n"), Wanted::Metrics);
        assert_eq!(parse_head(b"GET / HTTP/1.1\r\n\r\n"), Wanted::NotFound);
        assert_eq!(parse_head(b"POST /metrics HTTP/1.1\r\n\r\n"), Wanted::MethodNotAllowed);
        assert_eq!(parse_head(b"GET /metrics\r\n\r\n"), Wanted::BadRequest);
        assert_eq!(parse_head(b"\xff\xfe\r\n\r\n"), Wanted::BadRequest);
    }
}
