//! The 4-byte big-endian length prefix in front of every Kafka request and
//! response. A length is untrusted until [`frame_body_len`] has checked it
//! against the configured maximum, so no buffer is ever sized from a raw prefix.

/// Bytes of the length prefix.
pub const FRAME_LEN_BYTES: usize = 4;

/// The smallest request body that can hold a request header: api key (2),
/// api version (2) and correlation id (4).
pub const REQUEST_HEADER_BYTES_MIN: usize = 8;

/// Why a length prefix was refused. The connection that sent it is closed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FrameError {
    #[error("frame length {len} is negative")]
    Negative { len: i32 },
    #[error("frame length {len} is shorter than a request header ({REQUEST_HEADER_BYTES_MIN} bytes)")]
    TooShort { len: usize },
    #[error("frame length {len} exceeds the limit of {max} bytes (kafgres.max_frame_bytes)")]
    TooLarge { len: usize, max: usize },
}

/// Reads a request length prefix and checks it against `frame_bytes_max`.
pub fn frame_body_len(prefix: [u8; FRAME_LEN_BYTES], frame_bytes_max: usize) -> Result<usize, FrameError> {
    let raw = i32::from_be_bytes(prefix);
    if raw < 0 {
        return Err(FrameError::Negative { len: raw });
    }
    let len = raw as usize;
    if len < REQUEST_HEADER_BYTES_MIN {
        return Err(FrameError::TooShort { len });
    }
    if len > frame_bytes_max {
        return Err(FrameError::TooLarge { len, max: frame_bytes_max });
    }
    Ok(len)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_lengths_within_limits() {
        assert_eq!(frame_body_len(8i32.to_be_bytes(), 100), Ok(8));
        assert_eq!(frame_body_len(100i32.to_be_bytes(), 100), Ok(100));
    }

    #[test]
    fn refuses_negative_short_and_oversized_lengths() {
        assert_eq!(frame_body_len((-1i32).to_be_bytes(), 100), Err(FrameError::Negative { len: -1 }));
        assert_eq!(frame_body_len(7i32.to_be_bytes(), 100), Err(FrameError::TooShort { len: 7 }));
        assert_eq!(
            frame_body_len(i32::MAX.to_be_bytes(), 100 << 20),
            Err(FrameError::TooLarge { len: i32::MAX as usize, max: 100 << 20 })
        );
    }
}
