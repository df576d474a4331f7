//! The port through which the client blocks.
//!
//! The client never blocks in a system call: its socket is non-blocking, and
//! when a read, write or connect would block it asks the host's [`Wait`] to
//! wait for the socket, bounded by the operation's deadline. The Postgres
//! host implements it with `WaitLatchOrSocket` and `CHECK_FOR_INTERRUPTS`, so
//! a statement cancel ends a long poll; [`PollWait`] is the plain `poll(2)`
//! implementation for tests and for use outside Postgres.

use std::os::fd::RawFd;
use std::time::Instant;

use crate::error::ClientError;

/// What the client waits for on its socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Interest {
    Readable,
    Writable,
}

/// How a wait ended (a wait that should abort the operation returns an error,
/// typically [`ClientError::Interrupted`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ready {
    /// The socket may be ready (spurious wake-ups are fine: the client retries).
    Ready,
    /// The deadline passed.
    TimedOut,
}

/// Waits until `fd` is ready for `interest` or `deadline` passes.
pub trait Wait {
    fn wait(&mut self, fd: RawFd, interest: Interest, deadline: Option<Instant>) -> Result<Ready, ClientError>;
}

impl<W: Wait + ?Sized> Wait for &mut W {
    fn wait(&mut self, fd: RawFd, interest: Interest, deadline: Option<Instant>) -> Result<Ready, ClientError> {
        (**self).wait(fd, interest, deadline)
    }
}

/// Waits with `poll(2)`, retrying on EINTR; never interrupted.
#[derive(Debug, Clone, Copy, Default)]
pub struct PollWait;

impl Wait for PollWait {
    fn wait(&mut self, fd: RawFd, interest: Interest, deadline: Option<Instant>) -> Result<Ready, ClientError> {
        let events = match interest {
            Interest::Readable => libc::POLLIN,
            Interest::Writable => libc::POLLOUT,
        };
        loop {
            let timeout_ms = match deadline {
                None => -1,
                Some(deadline) => {
                    let now = Instant::now();
                    if now >= deadline {
                        return Ok(Ready::TimedOut);
                    }
                    // Rounded up, so poll never returns just before the deadline.
                    let left_ms = (deadline - now).as_nanos().div_ceil(1_000_000);
                    left_ms.min(i32::MAX as u128) as libc::c_int
                }
            };
            let mut pollfd = libc::pollfd { fd, events, revents: 0 };
            // SAFETY: one valid pollfd on the stack, count 1.
            let rc = unsafe { libc::poll(&mut pollfd, 1, timeout_ms) };
            if rc > 0 {
                // POLLERR and POLLHUP count as ready: the next read or write reports them.
                return Ok(Ready::Ready);
            }
            if rc < 0 {
                let err = std::io::Error::last_os_error();
                if err.kind() != std::io::ErrorKind::Interrupted {
                    return Err(ClientError::Io { api: "poll", source: err });
                }
            }
            // rc == 0 (timeout) or EINTR: the loop re-checks the deadline.
        }
    }
}
