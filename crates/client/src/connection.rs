//! One TCP connection to the broker: a non-blocking connect, request frames
//! out, response frames in, every blocking point through the [`Wait`] port and
//! bounded by a deadline.
//!
//! A response is read as: a 4-byte length (refused above the frame limit
//! before anything is allocated, and then read in chunks so a peer that lies
//! about the length costs at most what it sent), the correlation id (checked),
//! the response header's tagged fields, then the body, which [`crate::guard`]
//! walks before `kafka-protocol` decodes it. Any failure while a request is on
//! the wire leaves the stream at an unknown position, so the connection is
//! marked broken and refuses further calls.

use std::io::{self, Read, Write};
use std::mem;
use std::net::{SocketAddr, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
use std::time::Instant;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::protocol::{Decodable, HeaderVersion};

use crate::api::Pinned;
use crate::error::ClientError;
use crate::guard;
use crate::wait::{Interest, Ready, Wait};

/// Bytes of the length prefix.
const FRAME_LEN_BYTES: usize = 4;
/// A response buffer grows by at most this much per read.
const READ_CHUNK_BYTES: usize = 1 << 20;

pub struct Connection<W> {
    stream: TcpStream,
    waiter: W,
    client_id: String,
    frame_bytes_max: usize,
    next_correlation_id: i32,
    broken: bool,
}

impl<W: Wait> Connection<W> {
    /// Connects to `addr`, waiting through `waiter` until `deadline`.
    pub fn open(
        addr: SocketAddr,
        client_id: &str,
        mut waiter: W,
        frame_bytes_max: usize,
        deadline: Instant,
    ) -> Result<Self, ClientError> {
        if client_id.len() > i16::MAX as usize {
            return Err(ClientError::InvalidArgument(format!("client id of {} bytes", client_id.len())));
        }
        let stream = connect(addr, &mut waiter, deadline)?;
        stream.set_nodelay(true).map_err(|source| ClientError::Io { api: "connect", source })?;
        Ok(Connection {
            stream,
            waiter,
            client_id: client_id.to_owned(),
            frame_bytes_max,
            next_correlation_id: 1,
            broken: false,
        })
    }

    pub fn is_broken(&self) -> bool {
        self.broken
    }

    pub fn waiter_mut(&mut self) -> &mut W {
        &mut self.waiter
    }

    /// Sends one request; returns its correlation id. Several requests may be
    /// sent before their responses are received, in order.
    pub fn send<R: Pinned>(&mut self, request: &R, deadline: Instant) -> Result<i32, ClientError> {
        if self.broken {
            return Err(ClientError::Broken);
        }
        let correlation_id = self.next_correlation_id;
        self.next_correlation_id = self.next_correlation_id.checked_add(1).unwrap_or(1);
        let frame = self.encode(request, correlation_id)?;
        let result = self.write_all(&frame, deadline, R::API);
        self.broken |= result.is_err();
        result.map(|()| correlation_id)
    }

    /// Receives the response to `correlation_id`, which must be the next one.
    pub fn receive<R: Pinned>(&mut self, correlation_id: i32, deadline: Instant) -> Result<R::Response, ClientError> {
        if self.broken {
            return Err(ClientError::Broken);
        }
        let result = self.read_frame(deadline, R::API);
        self.broken |= result.is_err();
        let mut frame = result?;
        let received = frame.get_i32();
        if received != correlation_id {
            self.broken = true;
            return Err(ClientError::Protocol(format!(
                "{}: response carries correlation id {received}, expected {correlation_id}",
                R::API
            )));
        }
        let bad = |detail: String| ClientError::Protocol(format!("{} v{}: {detail}", R::API, R::VERSION));
        if <R::Response as HeaderVersion>::header_version(R::VERSION) >= 1 {
            let used = guard::skip_tagged_fields(&frame).map_err(|e| bad(format!("response header: {e}")))?;
            frame.advance(used);
        }
        guard::check(R::RESPONSE, &frame).map_err(|e| bad(format!("malformed response: {e}")))?;
        let response = R::Response::decode(&mut frame, R::VERSION).map_err(|e| bad(format!("cannot decode: {e}")))?;
        match frame.remaining() {
            0 => Ok(response),
            n => Err(bad(format!("{n} bytes left after the response"))),
        }
    }

    /// Sends a request and receives its response.
    pub fn call<R: Pinned>(&mut self, request: &R, deadline: Instant) -> Result<R::Response, ClientError> {
        let correlation_id = self.send(request, deadline)?;
        self.receive::<R>(correlation_id, deadline)
    }

    /// SaslHandshake v1 for `mechanism`, answered with its error code. The
    /// one request this client sends in a non-flexible version (SaslHandshake
    /// has no other), so it is framed and read here, not through
    /// [`crate::api`]: only the error code is read, the mechanism list skipped.
    pub fn sasl_handshake_v1(&mut self, mechanism: &str, deadline: Instant) -> Result<i16, ClientError> {
        const API: &str = "SaslHandshake";
        const KEY: i16 = 17;
        if self.broken {
            return Err(ClientError::Broken);
        }
        let correlation_id = self.next_correlation_id;
        self.next_correlation_id = self.next_correlation_id.checked_add(1).unwrap_or(1);
        let mut frame = BytesMut::with_capacity(32 + mechanism.len());
        frame.put_i32(0);
        frame.put_i16(KEY);
        frame.put_i16(1);
        frame.put_i32(correlation_id);
        frame.put_i16(self.client_id.len() as i16);
        frame.put_slice(self.client_id.as_bytes());
        frame.put_i16(mechanism.len() as i16);
        frame.put_slice(mechanism.as_bytes());
        let body_len = (frame.len() - FRAME_LEN_BYTES) as i32;
        frame[..FRAME_LEN_BYTES].copy_from_slice(&body_len.to_be_bytes());
        let result = self.write_all(&frame, deadline, API).and_then(|()| self.read_frame(deadline, API));
        self.broken |= result.is_err();
        let mut answer = result?;
        // correlation id (header v0), then the body's error code.
        if answer.remaining() < 6 {
            self.broken = true;
            return Err(ClientError::Protocol(format!("{API} v1: a response of {} bytes", answer.remaining())));
        }
        let received = answer.get_i32();
        if received != correlation_id {
            self.broken = true;
            return Err(ClientError::Protocol(format!(
                "{API}: response carries correlation id {received}, expected {correlation_id}"
            )));
        }
        Ok(answer.get_i16())
    }

    /// Length prefix, request header (v2: key, version, correlation id, client
    /// id, empty tagged fields; v1 without the tagged fields), body.
    fn encode<R: Pinned>(&self, request: &R, correlation_id: i32) -> Result<Bytes, ClientError> {
        let mut frame = BytesMut::with_capacity(64);
        frame.put_i32(0);
        frame.put_i16(R::KEY);
        frame.put_i16(R::VERSION);
        frame.put_i32(correlation_id);
        frame.put_i16(self.client_id.len() as i16);
        frame.put_slice(self.client_id.as_bytes());
        if <R as HeaderVersion>::header_version(R::VERSION) >= 2 {
            frame.put_u8(0);
        }
        request
            .encode(&mut frame, R::VERSION)
            .map_err(|e| ClientError::InvalidArgument(format!("{}: cannot encode the request: {e}", R::API)))?;
        let body_len = i32::try_from(frame.len() - FRAME_LEN_BYTES)
            .map_err(|_| ClientError::InvalidArgument(format!("{}: request of {} bytes", R::API, frame.len())))?;
        frame[..FRAME_LEN_BYTES].copy_from_slice(&body_len.to_be_bytes());
        Ok(frame.freeze())
    }

    fn write_all(&mut self, mut buf: &[u8], deadline: Instant, api: &'static str) -> Result<(), ClientError> {
        while !buf.is_empty() {
            match self.stream.write(buf) {
                Ok(0) => {
                    let source = io::Error::new(io::ErrorKind::WriteZero, "the broker stopped accepting bytes");
                    return Err(ClientError::Io { api, source });
                }
                Ok(n) => buf = &buf[n..],
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.wait(Interest::Writable, deadline, api)?,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(source) => return Err(ClientError::Io { api, source }),
            }
        }
        Ok(())
    }

    /// Reads one response frame, without its length prefix; it holds at least
    /// the correlation id.
    fn read_frame(&mut self, deadline: Instant, api: &'static str) -> Result<Bytes, ClientError> {
        let mut prefix = [0u8; FRAME_LEN_BYTES];
        self.read_exact(&mut prefix, deadline, api)?;
        let len = i32::from_be_bytes(prefix);
        if len < 4 {
            return Err(ClientError::Protocol(format!("{api}: response length {len} cannot hold a correlation id")));
        }
        let len = len as usize;
        if len > self.frame_bytes_max {
            return Err(ClientError::FrameTooLarge { api, len, bytes_max: self.frame_bytes_max });
        }
        let mut frame = Vec::new();
        while frame.len() < len {
            let start = frame.len();
            frame.resize(len.min(start + READ_CHUNK_BYTES), 0);
            self.read_exact(&mut frame[start..], deadline, api)?;
        }
        Ok(Bytes::from(frame))
    }

    fn read_exact(&mut self, buf: &mut [u8], deadline: Instant, api: &'static str) -> Result<(), ClientError> {
        let mut filled = 0;
        while filled < buf.len() {
            match self.stream.read(&mut buf[filled..]) {
                Ok(0) => {
                    let source = io::Error::new(io::ErrorKind::UnexpectedEof, "the broker closed the connection");
                    return Err(ClientError::Io { api, source });
                }
                Ok(n) => filled += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.wait(Interest::Readable, deadline, api)?,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(source) => return Err(ClientError::Io { api, source }),
            }
        }
        Ok(())
    }

    fn wait(&mut self, interest: Interest, deadline: Instant, api: &'static str) -> Result<(), ClientError> {
        wait_until(&mut self.waiter, self.stream.as_raw_fd(), interest, deadline, api)
    }
}

fn wait_until<W: Wait>(
    waiter: &mut W,
    fd: RawFd,
    interest: Interest,
    deadline: Instant,
    api: &'static str,
) -> Result<(), ClientError> {
    // Checked here too, so a waiter that ignores deadlines cannot make a
    // spuriously woken loop spin forever.
    if Instant::now() >= deadline {
        return Err(ClientError::Timeout { api });
    }
    match waiter.wait(fd, interest, Some(deadline))? {
        Ready::Ready => Ok(()),
        Ready::TimedOut => Err(ClientError::Timeout { api }),
    }
}

/// Connects without blocking: starts the connect, waits for writability,
/// then reads the socket's pending error.
fn connect<W: Wait>(addr: SocketAddr, waiter: &mut W, deadline: Instant) -> Result<TcpStream, ClientError> {
    let io_error = |source| ClientError::Io { api: "connect", source };
    let (stream, connected) = start_connect(&addr).map_err(io_error)?;
    if connected {
        return Ok(stream);
    }
    loop {
        wait_until(waiter, stream.as_raw_fd(), Interest::Writable, deadline, "connect")?;
        if let Some(e) = stream.take_error().map_err(io_error)? {
            return Err(io_error(e));
        }
        match stream.peer_addr() {
            Ok(_) => return Ok(stream),
            // Woken before the handshake finished.
            Err(e) if e.kind() == io::ErrorKind::NotConnected => {}
            Err(e) => return Err(io_error(e)),
        }
    }
}

/// Opens a non-blocking, close-on-exec TCP socket and starts connecting it;
/// the flag says whether the connect already completed.
fn start_connect(addr: &SocketAddr) -> io::Result<(TcpStream, bool)> {
    let family = match addr {
        SocketAddr::V4(_) => libc::AF_INET,
        SocketAddr::V6(_) => libc::AF_INET6,
    };
    // SAFETY: socket(2) with constant arguments.
    let fd = unsafe { libc::socket(family, libc::SOCK_STREAM, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a fresh socket that nothing else owns; the stream closes it.
    let stream = unsafe { TcpStream::from_raw_fd(fd) };
    // SAFETY: fcntl(2) on a descriptor we own.
    if unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) } < 0 {
        return Err(io::Error::last_os_error());
    }
    stream.set_nonblocking(true)?;
    let rc = match addr {
        SocketAddr::V4(a) => {
            // SAFETY: sockaddr_in is plain data; all-zero is a valid value.
            let mut sin: libc::sockaddr_in = unsafe { mem::zeroed() };
            sin.sin_family = libc::AF_INET as libc::sa_family_t;
            sin.sin_port = a.port().to_be();
            sin.sin_addr = libc::in_addr { s_addr: u32::from_ne_bytes(a.ip().octets()) };
            let len = mem::size_of_val(&sin) as libc::socklen_t;
            // SAFETY: a valid sockaddr_in and its size.
            unsafe { libc::connect(fd, (&sin as *const libc::sockaddr_in).cast(), len) }
        }
        SocketAddr::V6(a) => {
            // SAFETY: sockaddr_in6 is plain data; all-zero is a valid value.
            let mut sin6: libc::sockaddr_in6 = unsafe { mem::zeroed() };
            sin6.sin6_family = libc::AF_INET6 as libc::sa_family_t;
            sin6.sin6_port = a.port().to_be();
            sin6.sin6_flowinfo = a.flowinfo();
            sin6.sin6_addr = libc::in6_addr { s6_addr: a.ip().octets() };
            sin6.sin6_scope_id = a.scope_id();
            let len = mem::size_of_val(&sin6) as libc::socklen_t;
            // SAFETY: a valid sockaddr_in6 and its size.
            unsafe { libc::connect(fd, (&sin6 as *const libc::sockaddr_in6).cast(), len) }
        }
    };
    if rc == 0 {
        return Ok((stream, true));
    }
    let err = io::Error::last_os_error();
    match err.raw_os_error() {
        // The connect goes on in the background (after EINTR too).
        Some(libc::EINPROGRESS) | Some(libc::EINTR) => Ok((stream, false)),
        _ => Err(err),
    }
}
