//! Bytes written into the WAL by SQL functions, and the envelope added when
//! they are decoded.
//!
//! `kafgres.send()` logs one transactional logical message per record with
//! prefix [`SEND_PREFIX`]; `kafgres.consume()` logs one per committed
//! partition with prefix [`OFFSETS_PREFIX`]. The output plugin wraps each
//! decoded message in an envelope `kind u8 | commit end LSN u64 | commit time
//! (ms since the Unix epoch) i64 | body`. Integers are big-endian; strings
//! carry a u16 length, byte strings an i32 length (-1 for NULL). Every body
//! starts with a format version byte so old WAL stays readable.

/// Logical-message prefix of records sent from SQL.
pub const SEND_PREFIX: &str = "kafgres.send";
/// Logical-message prefix of offsets committed by `kafgres.consume()`.
pub const OFFSETS_PREFIX: &str = "kafgres.offsets";

/// Envelope kinds.
pub const KIND_SEND: u8 = b'S';
pub const KIND_OFFSETS: u8 = b'O';

const FORMAT_VERSION: u8 = 1;
const ENVELOPE_BYTES: usize = 1 + 8 + 8;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("truncated {what}")]
    Truncated { what: &'static str },
    #[error("unknown message format version {0}")]
    Version(u8),
    #[error("unknown envelope kind {0:#x}")]
    Kind(u8),
    #[error("{what} is not UTF-8")]
    NotUtf8 { what: &'static str },
    #[error("{0} trailing bytes")]
    Trailing(usize),
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

/// Everything one committed transaction sent or committed, in the order the
/// transaction did it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CommittedTxn {
    /// The end of the commit record: unique per transaction, increasing in
    /// commit order, what the slot is confirmed up to.
    pub end_lsn: u64,
    pub commit_time_ms: i64,
    pub sends: Vec<SendMessage>,
    pub offsets: Vec<OffsetCommitMessage>,
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

    /// What the record adds to a batch, roughly: used to split a large
    /// transaction into batches under the topic's size limit.
    pub fn estimated_record_bytes(&self) -> usize {
        24 + self.key.as_ref().map_or(0, Vec::len)
            + self.value.as_ref().map_or(0, Vec::len)
            + self.headers.iter().map(|(k, v)| 10 + k.len() + v.as_ref().map_or(0, Vec::len)).sum::<usize>()
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

/// Writes the envelope the output plugin puts before a message body.
pub fn encode_envelope(out: &mut Vec<u8>, kind: u8, end_lsn: u64, commit_time_ms: i64) {
    out.push(kind);
    out.extend_from_slice(&end_lsn.to_be_bytes());
    out.extend_from_slice(&commit_time_ms.to_be_bytes());
}

/// Groups decoded plugin outputs (each an envelope and a body) into
/// transactions. Outputs arrive in commit order and a transaction's messages
/// are contiguous, so consecutive outputs with one end LSN form one. An
/// output that does not decode is left out and reported with its LSN (a
/// committed transaction's other records still go through).
pub fn group_committed<'a>(
    outputs: impl IntoIterator<Item = &'a [u8]>,
) -> (Vec<CommittedTxn>, Vec<(u64, DecodeError)>) {
    let mut txns: Vec<CommittedTxn> = Vec::new();
    let mut errors = Vec::new();
    for output in outputs {
        let Some((kind, end_lsn, commit_time_ms, body)) = split_envelope(output) else {
            errors.push((0, DecodeError::Truncated { what: "envelope" }));
            continue;
        };
        if txns.last().is_none_or(|t| t.end_lsn != end_lsn) {
            txns.push(CommittedTxn { end_lsn, commit_time_ms, ..CommittedTxn::default() });
        }
        let Some(txn) = txns.last_mut() else { continue };
        let decoded = match kind {
            KIND_SEND => SendMessage::decode(body).map(|m| txn.sends.push(m)),
            KIND_OFFSETS => OffsetCommitMessage::decode(body).map(|m| txn.offsets.push(m)),
            other => Err(DecodeError::Kind(other)),
        };
        if let Err(e) = decoded {
            errors.push((end_lsn, e));
        }
    }
    (txns, errors)
}

fn split_envelope(output: &[u8]) -> Option<(u8, u64, i64, &[u8])> {
    if output.len() < ENVELOPE_BYTES {
        return None;
    }
    let end_lsn = u64::from_be_bytes(output[1..9].try_into().ok()?);
    let commit_time_ms = i64::from_be_bytes(output[9..17].try_into().ok()?);
    Some((output[0], end_lsn, commit_time_ms, &output[ENVELOPE_BYTES..]))
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

    fn version(&mut self) -> Result<(), DecodeError> {
        match self.take(1, "version")?[0] {
            FORMAT_VERSION => Ok(()),
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
    fn every_truncation_is_an_error_not_a_panic() {
        let bytes = sample().encode();
        for cut in 0..bytes.len() {
            assert!(SendMessage::decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert_eq!(SendMessage::decode(&longer), Err(DecodeError::Trailing(1)));
    }

    #[test]
    fn outputs_group_into_transactions_by_commit_lsn() {
        let mut outputs = Vec::new();
        for (lsn, kind, body) in [
            (100u64, KIND_SEND, sample().encode()),
            (
                100,
                KIND_OFFSETS,
                OffsetCommitMessage { group_id: "g".into(), topic: "t".into(), partition: 0, offset: 7 }.encode(),
            ),
            (200, KIND_SEND, sample().encode()),
        ] {
            let mut out = Vec::new();
            encode_envelope(&mut out, kind, lsn, 5);
            out.extend_from_slice(&body);
            outputs.push(out);
        }
        let (txns, errors) = group_committed(outputs.iter().map(Vec::as_slice));
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(txns.len(), 2);
        assert_eq!((txns[0].end_lsn, txns[0].sends.len(), txns[0].offsets.len()), (100, 1, 1));
        assert_eq!(txns[0].offsets[0].offset, 7);
        assert_eq!((txns[1].end_lsn, txns[1].sends.len()), (200, 1));
        let mut bad = outputs[0].clone();
        bad[0] = b'?';
        let (txns, errors) = group_committed([bad.as_slice(), outputs[2].as_slice()]);
        assert_eq!(errors, [(100, DecodeError::Kind(b'?'))]);
        assert_eq!(txns.iter().map(|t| t.sends.len()).sum::<usize>(), 1, "the good output still counts");
    }
}
