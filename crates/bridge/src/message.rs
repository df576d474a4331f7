//! The bytes SQL functions write into the WAL.
//!
//! Each is a transactional logical message (`LogLogicalMessage`), so it lives
//! in the WAL of the transaction that wrote it and means something only if
//! that transaction commits:
//!
//! - `kafgres.send()` logs one message per record, prefix [`SEND_PREFIX`];
//! - `kafgres.consume()` logs one per committed partition, prefix [`OFFSETS_PREFIX`];
//! - at pre-commit (and pre-prepare), a transaction that logged any of those
//!   logs one [`EndMessage`], prefix [`END_PREFIX`], with the number of
//!   messages its committed (sub)transactions logged. The reader compares it
//!   with what it found in the WAL: a transaction whose first messages lie in
//!   WAL the reader never saw (it started reading after them: a first start,
//!   WAL removed under it) is recognised as incomplete instead of being
//!   delivered in part.
//!
//! Integers are big-endian; strings carry a u16 length, byte strings an i32
//! length (-1 for NULL). Every body starts with a format version byte:
//! version 1 is what releases before the end message wrote (a transaction of
//! version-1 messages has no end message and is taken as complete); version 2
//! bodies have the same layout and promise an end message.

/// Logical-message prefix of records sent from SQL.
pub const SEND_PREFIX: &str = "kafgres.send";
/// Logical-message prefix of offsets committed by `kafgres.consume()`.
pub const OFFSETS_PREFIX: &str = "kafgres.offsets";
/// Logical-message prefix of a transaction's count of the messages above.
pub const END_PREFIX: &str = "kafgres.end";

/// Headers a sender leaves NULL for the bridge to fill in with what only the
/// commit knows: the end of the transaction's commit record, as Postgres
/// writes an LSN (`16/B374D848`), and its commit time in milliseconds since
/// the epoch (decimal). Change capture asks for both on every record.
pub const COMMIT_LSN_HEADER: &str = "kafgres.commit_lsn";
pub const COMMIT_TIME_HEADER: &str = "kafgres.commit_ts_ms";

/// The version this library writes.
pub const FORMAT_VERSION: u8 = 2;
/// The version of releases without the end message (still read).
pub const FORMAT_VERSION_WITHOUT_END: u8 = 1;

/// Which of the bridge's messages a logical message is, by its prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MessageKind {
    Send,
    Offsets,
    End,
}

impl MessageKind {
    /// The kind of a message with this prefix; `None` for other extensions' messages.
    pub fn from_prefix(prefix: &[u8]) -> Option<MessageKind> {
        match prefix {
            p if p == SEND_PREFIX.as_bytes() => Some(MessageKind::Send),
            p if p == OFFSETS_PREFIX.as_bytes() => Some(MessageKind::Offsets),
            p if p == END_PREFIX.as_bytes() => Some(MessageKind::End),
            _ => None,
        }
    }

    pub fn prefix(self) -> &'static str {
        match self {
            MessageKind::Send => SEND_PREFIX,
            MessageKind::Offsets => OFFSETS_PREFIX,
            MessageKind::End => END_PREFIX,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("truncated {what}")]
    Truncated { what: &'static str },
    #[error("unknown message format version {0}")]
    Version(u8),
    #[error("{what} is not UTF-8")]
    NotUtf8 { what: &'static str },
    #[error("{0} trailing bytes")]
    Trailing(usize),
}

/// A transaction's last bridge message: how many send and offset messages
/// its committed (sub)transactions logged before it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EndMessage {
    pub messages: u32,
}

impl EndMessage {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(5);
        out.push(FORMAT_VERSION);
        out.extend_from_slice(&self.messages.to_be_bytes());
        out
    }

    pub fn decode(body: &[u8]) -> Result<EndMessage, DecodeError> {
        let mut r = Reader(body);
        match r.version()? {
            FORMAT_VERSION => {}
            other => return Err(DecodeError::Version(other)),
        }
        let messages = r.u32("message count")?;
        r.finish()?;
        Ok(EndMessage { messages })
    }
}

/// The format version a send or offsets body was written with.
pub fn body_version(body: &[u8]) -> Result<u8, DecodeError> {
    match body.first() {
        None => Err(DecodeError::Truncated { what: "version" }),
        Some(&v @ (FORMAT_VERSION | FORMAT_VERSION_WITHOUT_END)) => Ok(v),
        Some(&other) => Err(DecodeError::Version(other)),
    }
}

/// One record sent from SQL.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SendMessage {
    pub topic: String,
    pub partition: i32,
    pub timestamp_ms: i64,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub headers: Vec<(String, Option<Vec<u8>>)>,
}

/// One partition's offset, committed by `kafgres.consume()` in a transaction.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OffsetCommitMessage {
    pub group_id: String,
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
}

impl SendMessage {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(
            32 + self.topic.len()
                + self.key.as_ref().map_or(0, Vec::len)
                + self.value.as_ref().map_or(0, Vec::len)
                + self.headers.iter().map(|(k, v)| 8 + k.len() + v.as_ref().map_or(0, Vec::len)).sum::<usize>(),
        );
        out.push(FORMAT_VERSION);
        put_str(&mut out, &self.topic);
        out.extend_from_slice(&self.partition.to_be_bytes());
        out.extend_from_slice(&self.timestamp_ms.to_be_bytes());
        put_bytes(&mut out, self.key.as_deref());
        put_bytes(&mut out, self.value.as_deref());
        out.extend_from_slice(&(self.headers.len() as u32).to_be_bytes());
        for (name, value) in &self.headers {
            put_str(&mut out, name);
            put_bytes(&mut out, value.as_deref());
        }
        out
    }

    pub fn decode(body: &[u8]) -> Result<SendMessage, DecodeError> {
        let mut r = Reader(body);
        r.version()?;
        let topic = r.string("topic")?;
        let partition = r.i32("partition")?;
        let timestamp_ms = r.i64("timestamp")?;
        let key = r.bytes("key")?;
        let value = r.bytes("value")?;
        let count = r.u32("header count")?;
        let mut headers = Vec::with_capacity((count as usize).min(1024));
        for _ in 0..count {
            headers.push((r.string("header name")?, r.bytes("header value")?));
        }
        r.finish()?;
        Ok(SendMessage { topic, partition, timestamp_ms, key, value, headers })
    }

    /// Fills the commit headers ([`COMMIT_LSN_HEADER`], [`COMMIT_TIME_HEADER`])
    /// the sender left NULL; a header with a value keeps it.
    pub fn fill_commit_headers(&mut self, end_lsn: u64, commit_time_ms: i64) {
        for (name, value) in &mut self.headers {
            if value.is_some() {
                continue;
            }
            if name == COMMIT_LSN_HEADER {
                *value = Some(format!("{:X}/{:X}", end_lsn >> 32, end_lsn & 0xffff_ffff).into_bytes());
            } else if name == COMMIT_TIME_HEADER {
                *value = Some(commit_time_ms.to_string().into_bytes());
            }
        }
    }

    /// The most the record can add to an uncompressed v2 batch: its bytes
    /// plus the longest framing (length, timestamp and offset deltas, key and
    /// value lengths, header count: 5 + 1 + 10 + 5 + 5 + 5 + 5 bytes; 10 per
    /// header). An upper bound, so batches split by it stay under the topic's
    /// `max.message.bytes`.
    pub fn estimated_record_bytes(&self) -> usize {
        const FRAMING_BYTES_MAX: usize = 36;
        const HEADER_FRAMING_BYTES_MAX: usize = 10;
        FRAMING_BYTES_MAX
            + self.key.as_ref().map_or(0, Vec::len)
            + self.value.as_ref().map_or(0, Vec::len)
            + self
                .headers
                .iter()
                .map(|(k, v)| HEADER_FRAMING_BYTES_MAX + k.len() + v.as_ref().map_or(0, Vec::len))
                .sum::<usize>()
    }
}

impl OffsetCommitMessage {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(32 + self.group_id.len() + self.topic.len());
        out.push(FORMAT_VERSION);
        put_str(&mut out, &self.group_id);
        put_str(&mut out, &self.topic);
        out.extend_from_slice(&self.partition.to_be_bytes());
        out.extend_from_slice(&self.offset.to_be_bytes());
        out
    }

    pub fn decode(body: &[u8]) -> Result<OffsetCommitMessage, DecodeError> {
        let mut r = Reader(body);
        r.version()?;
        let message = OffsetCommitMessage {
            group_id: r.string("group id")?,
            topic: r.string("topic")?,
            partition: r.i32("partition")?,
            offset: r.i64("offset")?,
        };
        r.finish()?;
        Ok(message)
    }
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    // Topic names, group ids and header names are far below 64 KiB; the SQL
    // functions refuse longer ones before encoding.
    let bytes = &s.as_bytes()[..s.len().min(u16::MAX as usize)];
    out.extend_from_slice(&(bytes.len() as u16).to_be_bytes());
    out.extend_from_slice(bytes);
}

fn put_bytes(out: &mut Vec<u8>, b: Option<&[u8]>) {
    match b {
        None => out.extend_from_slice(&(-1i32).to_be_bytes()),
        Some(b) => {
            out.extend_from_slice(&(b.len() as i32).to_be_bytes());
            out.extend_from_slice(b);
        }
    }
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], DecodeError> {
        if self.0.len() < n {
            return Err(DecodeError::Truncated { what });
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    fn version(&mut self) -> Result<u8, DecodeError> {
        match self.take(1, "version")?[0] {
            v @ (FORMAT_VERSION | FORMAT_VERSION_WITHOUT_END) => Ok(v),
            other => Err(DecodeError::Version(other)),
        }
    }

    fn u32(&mut self, what: &'static str) -> Result<u32, DecodeError> {
        let b = self.take(4, what)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn i32(&mut self, what: &'static str) -> Result<i32, DecodeError> {
        Ok(self.u32(what)? as i32)
    }

    fn i64(&mut self, what: &'static str) -> Result<i64, DecodeError> {
        let b = self.take(8, what)?;
        Ok(i64::from_be_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]))
    }

    fn string(&mut self, what: &'static str) -> Result<String, DecodeError> {
        let len = self.take(2, what)?;
        let len = u16::from_be_bytes([len[0], len[1]]) as usize;
        let bytes = self.take(len, what)?;
        String::from_utf8(bytes.to_vec()).map_err(|_| DecodeError::NotUtf8 { what })
    }

    fn bytes(&mut self, what: &'static str) -> Result<Option<Vec<u8>>, DecodeError> {
        let len = self.i32(what)?;
        if len < 0 {
            return Ok(None);
        }
        Ok(Some(self.take(len as usize, what)?.to_vec()))
    }

    fn finish(&self) -> Result<(), DecodeError> {
        match self.0.len() {
            0 => Ok(()),
            n => Err(DecodeError::Trailing(n)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> SendMessage {
        SendMessage {
            topic: "orders".into(),
            partition: 3,
            timestamp_ms: 1_700_000_000_123,
            key: Some(b"k".to_vec()),
            value: None,
            headers: vec![("a".into(), Some(b"1".to_vec())), ("b".into(), None)],
        }
    }

    #[test]
    fn send_round_trips() {
        let m = sample();
        assert_eq!(SendMessage::decode(&m.encode()), Ok(m));
    }

    #[test]
    fn commit_headers_left_null_are_filled_and_others_kept() {
        let mut m = sample();
        m.headers = vec![
            (COMMIT_LSN_HEADER.into(), None),
            ("other".into(), None),
            (COMMIT_TIME_HEADER.into(), None),
            (COMMIT_TIME_HEADER.into(), Some(b"given".to_vec())),
        ];
        m.fill_commit_headers(0x16_B374_D848, 1_796_288_054_662);
        assert_eq!(
            m.headers,
            vec![
                (COMMIT_LSN_HEADER.into(), Some(b"16/B374D848".to_vec())),
                ("other".into(), None),
                (COMMIT_TIME_HEADER.into(), Some(b"1796288054662".to_vec())),
                (COMMIT_TIME_HEADER.into(), Some(b"given".to_vec())),
            ]
        );
    }

    #[test]
    fn version_one_bodies_still_decode() {
        let mut old = sample().encode();
        old[0] = FORMAT_VERSION_WITHOUT_END;
        assert_eq!(body_version(&old), Ok(FORMAT_VERSION_WITHOUT_END));
        assert_eq!(SendMessage::decode(&old), Ok(sample()));
        old[0] = 3;
        assert_eq!(SendMessage::decode(&old), Err(DecodeError::Version(3)));
    }

    #[test]
    fn end_message_round_trips_and_refuses_damage() {
        let end = EndMessage { messages: 70_000 };
        let bytes = end.encode();
        assert_eq!(EndMessage::decode(&bytes), Ok(end));
        for cut in 0..bytes.len() {
            assert!(EndMessage::decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        assert_eq!(MessageKind::from_prefix(b"kafgres.end"), Some(MessageKind::End));
        assert_eq!(MessageKind::from_prefix(b"kafgres.endx"), None);
    }

    #[test]
    fn every_truncation_is_an_error_not_a_panic() {
        let bytes = sample().encode();
        for cut in 0..bytes.len() {
            assert!(SendMessage::decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert_eq!(SendMessage::decode(&longer), Err(DecodeError::Trailing(1)));
    }
}
