//! How many bytes a connection's socket must hold before the kernel wakes
//! the broker for it (Linux `SO_RCVLOWAT`). While a large request arrives,
//! its reader asks to be woken once a good part of what is still sure to
//! come is there, instead of at every segment: a TLS client writes each
//! 16 KiB record with its own `write`, so a 1 MB produce woke the broker
//! some 60 times, each time for a `recvfrom`, an `epoll_wait` and a context
//! switch (measured: 97,000 reads a second of 5 KB each at 500 MB/s). The
//! threshold never exceeds what the current frame still needs from the
//! socket, so it cannot hold back bytes that are not coming, and it is back
//! at one byte before the connection waits for its next request.
//!
//! This module owns the socket option only: it never reads or writes the
//! socket, and a failed `setsockopt` costs wakeups, never correctness.

use std::os::fd::RawFd;

/// Below this much sure to come, the threshold stays at one byte: fewer
/// wakeups would not pay for the system call that sets it.
const ENGAGE_BYTES: usize = 32 * 1024;
/// The most a reader waits for at once. Larger made no difference in the
/// TLS produce bench, and the kernel grows the socket's receive buffer to
/// twice the threshold.
pub const THRESHOLD_MAX_BYTES: usize = 256 * 1024;
/// Thresholds are whole steps, so a frame's read sets the option a few
/// times, not at every read.
const STEP_BYTES: usize = 16 * 1024;

/// The wake threshold of one connection's socket.
#[derive(Debug)]
pub struct WakeThreshold {
    fd: RawFd,
    /// The most the layers between the socket and the frame reader can hold
    /// (a TLS session's buffers); 0 for plain TCP.
    held_below: usize,
    current: usize,
}

impl WakeThreshold {
    /// `held_below`: the most the stream's layers below the frame reader may
    /// hold of what the socket delivered, counted as the bytes they can
    /// still give the reader (for TLS, every ciphertext byte is at most one
    /// plaintext byte).
    pub fn new(fd: RawFd, held_below: usize) -> WakeThreshold {
        WakeThreshold { fd, held_below, current: 1 }
    }

    /// The reader still needs `coming` bytes of the current frame that it
    /// has not buffered itself.
    pub fn expect(&mut self, coming: usize) {
        self.set(threshold_for(coming, self.held_below));
    }

    /// Back to one byte: between requests nothing more is sure to come.
    pub fn reset(&mut self) {
        self.set(1);
    }

    /// The threshold last set on the socket.
    pub fn current(&self) -> usize {
        self.current
    }

    fn set(&mut self, bytes: usize) {
        if bytes == self.current {
            return;
        }
        let value = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
        // SAFETY: a setsockopt on the connection's open socket, with a
        // pointer to a live c_int and its size.
        let rc = unsafe {
            libc::setsockopt(
                self.fd,
                libc::SOL_SOCKET,
                libc::SO_RCVLOWAT,
                (&value as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if rc == 0 {
            self.current = bytes;
        }
    }
}

/// The threshold for a frame that still needs `coming` bytes through layers
/// that may hold up to `held_below` of them: what is sure to arrive on the
/// socket, in whole steps, at most [`THRESHOLD_MAX_BYTES`]; one byte when
/// that is little.
pub fn threshold_for(coming: usize, held_below: usize) -> usize {
    let sure = coming.saturating_sub(held_below);
    if sure < ENGAGE_BYTES {
        return 1;
    }
    sure.min(THRESHOLD_MAX_BYTES) / STEP_BYTES * STEP_BYTES
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    #[test]
    fn the_threshold_never_exceeds_what_is_sure_to_come() {
        for held_below in [0, 1000, 168 * 1024] {
            for coming in (0..2_000_000).step_by(997) {
                let threshold = threshold_for(coming, held_below);
                assert!(threshold >= 1);
                let sure = coming.saturating_sub(held_below);
                assert!(threshold == 1 || threshold <= sure, "{threshold} for {sure} sure to come");
                assert!(threshold <= THRESHOLD_MAX_BYTES);
            }
        }
        assert_eq!(threshold_for(ENGAGE_BYTES - 1, 0), 1, "little left: woken at every byte");
        assert_eq!(threshold_for(100 * 1024 + 5, 0), 96 * 1024, "whole steps, rounded down");
        assert_eq!(threshold_for(10 << 20, 0), THRESHOLD_MAX_BYTES);
        assert_eq!(threshold_for(200 * 1024, 168 * 1024), 32 * 1024, "what layers below may hold is not counted");
    }

    fn socket_threshold(fd: RawFd) -> libc::c_int {
        let mut value: libc::c_int = 0;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: a getsockopt into a live c_int of the given size.
        let rc = unsafe {
            libc::getsockopt(fd, libc::SOL_SOCKET, libc::SO_RCVLOWAT, (&mut value as *mut libc::c_int).cast(), &mut len)
        };
        assert_eq!(rc, 0, "getsockopt: {}", std::io::Error::last_os_error());
        value
    }

    #[test]
    fn expect_and_reset_set_the_socket_option() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let _client = std::net::TcpStream::connect(listener.local_addr().expect("addr")).expect("connect");
        let (server, _) = listener.accept().expect("accept");
        let mut threshold = WakeThreshold::new(server.as_raw_fd(), 0);
        threshold.expect(1 << 20);
        assert_eq!(socket_threshold(server.as_raw_fd()), THRESHOLD_MAX_BYTES as libc::c_int);
        assert_eq!(threshold.current(), THRESHOLD_MAX_BYTES);
        threshold.expect(64 * 1024);
        assert_eq!(socket_threshold(server.as_raw_fd()), 64 * 1024);
        threshold.reset();
        assert_eq!(socket_threshold(server.as_raw_fd()), 1);
        assert_eq!(threshold.current(), 1);
    }
}
