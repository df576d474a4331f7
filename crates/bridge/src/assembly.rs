//! Transactions reassembled from the WAL, as Postgres's own logical decoding
//! would hand them over, but from a handful of record types only.
//!
//! The reader (the extension) feeds [`WalEvent`]s in WAL order: the bridge's
//! logical messages with the xid that wrote them, the end of every
//! transaction (commit or abort, with its subtransactions), and the oldest
//! running xid that each running-transactions record carries. The
//! [`Assembler`] keeps the messages of open transactions in memory and, at
//! each commit, returns the transaction's messages (its own and those of the
//! subtransactions the commit record lists, in WAL order) or says why it
//! cannot be delivered whole.
//!
//! Decision table at a commit record (at `end_lsn`):
//!
//! | messages found                          | end message | outcome                                  |
//! |-----------------------------------------|-------------|------------------------------------------|
//! | none                                    | –           | nothing (not a sending transaction)      |
//! | any, `end_lsn` ≤ the skip point         | any         | nothing (applied before a restart)       |
//! | version-1 bodies only                   | none        | [`Assembled::Committed`] (older library) |
//! | count equals the end message's          | yes         | [`Assembled::Committed`]                 |
//! | anything else                           | any         | [`Assembled::Incomplete`]                |
//!
//! An abort drops the xid's messages and those of the subtransactions it
//! lists; a subtransaction rolled back to a savepoint writes its own abort
//! record, and the top-level commit never lists it. A transaction that never
//! ends (its backend crashed, or the server did) is dropped once a
//! running-transactions record shows an oldest running xid past it, as
//! logical decoding does.
//!
//! It never touches Postgres; xids are 32-bit and compared modulo 2^32 as
//! Postgres compares normal xids.

use std::collections::HashMap;

use crate::message::{
    body_version, DecodeError, EndMessage, MessageKind, OffsetCommitMessage, SendMessage, FORMAT_VERSION_WITHOUT_END,
};

/// One WAL record the assembler cares about, in WAL order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WalEvent<'a> {
    /// A transactional logical message with one of the bridge's prefixes.
    Message { xid: u32, lsn: u64, kind: MessageKind, body: &'a [u8] },
    /// A commit (or COMMIT PREPARED) record of `xid`, ending at `end_lsn`.
    Commit { xid: u32, subxids: &'a [u32], end_lsn: u64, commit_time_ms: i64 },
    /// An abort (or ROLLBACK PREPARED) record of `xid` and its subtransactions.
    Abort { xid: u32, subxids: &'a [u32] },
    /// A running-transactions record: every xid before `oldest_running_xid`
    /// has ended, with or without a record saying so.
    RunningXacts { oldest_running_xid: u32 },
}

/// Everything one committed transaction sent or committed, in the order the
/// transaction did it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CommittedTxn {
    pub xid: u32,
    /// The end of the commit record: unique per transaction and increasing in
    /// commit order; the bridge's checkpoint counts in these.
    pub end_lsn: u64,
    pub commit_time_ms: i64,
    pub sends: Vec<SendMessage>,
    pub offsets: Vec<OffsetCommitMessage>,
}

/// What a commit record yields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Assembled {
    Committed(CommittedTxn),
    /// A committed transaction whose messages the reader did not all see:
    /// not delivered at all (never in part), and reported.
    Incomplete {
        xid: u32,
        end_lsn: u64,
        found: u32,
        expected: Option<u32>,
    },
    /// A committed transaction with a message that does not decode: the
    /// others are delivered; the damaged ones are reported.
    Damaged {
        txn: CommittedTxn,
        errors: Vec<DecodeError>,
    },
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum AssemblyError {
    #[error(
        "open transactions hold {bytes} bytes of messages, more than the limit of {limit} bytes \
         (transaction {xid} holds the most); raise kafgres.sql_bridge_memory_mb"
    )]
    MemoryFull { bytes: usize, limit: usize, xid: u32 },
}

#[derive(Debug, Default)]
struct OpenTxn {
    /// Where its first message starts: the WAL a restart must read again.
    first_lsn: u64,
    messages: Vec<(u64, MessageKind, Vec<u8>)>,
    bytes: usize,
}

/// The state of reassembly: open transactions' messages, and the commit
/// position below which transactions were delivered before a restart.
#[derive(Debug)]
pub struct Assembler {
    open: HashMap<u32, OpenTxn>,
    bytes: usize,
    bytes_max: usize,
    /// Commits ending at or before this were applied before the reader
    /// started: reassembled (their messages must still be consumed) but not
    /// handed out again.
    applied_lsn: u64,
}

impl Assembler {
    /// A new assembler that skips transactions committed at or before
    /// `applied_lsn` and refuses to hold more than `bytes_max` bytes of
    /// messages of open transactions.
    pub fn new(applied_lsn: u64, bytes_max: usize) -> Assembler {
        Assembler { open: HashMap::new(), bytes: 0, bytes_max, applied_lsn }
    }

    pub fn set_bytes_max(&mut self, bytes_max: usize) {
        self.bytes_max = bytes_max;
    }

    /// Bytes of messages held for open transactions.
    pub fn bytes_held(&self) -> usize {
        self.bytes
    }

    pub fn open_transactions(&self) -> usize {
        self.open.len()
    }

    /// Where a reader must start again to rebuild the open transactions: the
    /// first message of the oldest, or `position` (the end of what was read)
    /// when none is open.
    pub fn restart_lsn(&self, position: u64) -> u64 {
        self.open.values().map(|t| t.first_lsn).min().map_or(position, |first| first.min(position))
    }

    /// Takes one WAL event; a commit of a transaction that sent may yield its
    /// messages. An error leaves the state unchanged: the same event may be
    /// fed again once the limit is raised.
    pub fn push(&mut self, event: WalEvent<'_>) -> Result<Option<Assembled>, AssemblyError> {
        match event {
            WalEvent::Message { xid, lsn, kind, body } => {
                if self.bytes + body.len() > self.bytes_max {
                    let heaviest = self.open.iter().max_by_key(|(_, t)| t.bytes).map_or(xid, |(x, _)| *x);
                    return Err(AssemblyError::MemoryFull {
                        bytes: self.bytes + body.len(),
                        limit: self.bytes_max,
                        xid: heaviest,
                    });
                }
                let txn = self.open.entry(xid).or_insert_with(|| OpenTxn { first_lsn: lsn, ..OpenTxn::default() });
                txn.bytes += body.len();
                txn.messages.push((lsn, kind, body.to_vec()));
                self.bytes += body.len();
                Ok(None)
            }
            WalEvent::Abort { xid, subxids } => {
                self.forget(xid);
                for &sub in subxids {
                    self.forget(sub);
                }
                Ok(None)
            }
            WalEvent::RunningXacts { oldest_running_xid } => {
                let ended: Vec<u32> =
                    self.open.keys().copied().filter(|&x| xid_precedes(x, oldest_running_xid)).collect();
                for xid in ended {
                    self.forget(xid);
                }
                Ok(None)
            }
            WalEvent::Commit { xid, subxids, end_lsn, commit_time_ms } => {
                let mut messages = Vec::new();
                for x in std::iter::once(xid).chain(subxids.iter().copied()) {
                    if let Some(txn) = self.open.remove(&x) {
                        self.bytes -= txn.bytes;
                        messages.extend(txn.messages);
                    }
                }
                if messages.is_empty() || end_lsn <= self.applied_lsn {
                    return Ok(None);
                }
                messages.sort_by_key(|(lsn, _, _)| *lsn);
                Ok(Some(assemble(xid, end_lsn, commit_time_ms, messages)))
            }
        }
    }

    fn forget(&mut self, xid: u32) {
        if let Some(txn) = self.open.remove(&xid) {
            self.bytes -= txn.bytes;
        }
    }
}

/// The decision table of the module comment, for one committed transaction's
/// messages in WAL order.
fn assemble(xid: u32, end_lsn: u64, commit_time_ms: i64, messages: Vec<(u64, MessageKind, Vec<u8>)>) -> Assembled {
    let mut end: Option<u32> = None;
    let mut counted = 0u32;
    let mut only_version_one = true;
    let mut txn = CommittedTxn { xid, end_lsn, commit_time_ms, ..CommittedTxn::default() };
    let mut errors = Vec::new();
    for (_, kind, body) in &messages {
        if *kind == MessageKind::End {
            match EndMessage::decode(body) {
                Ok(m) => end = Some(m.messages),
                Err(e) => errors.push(e),
            }
            continue;
        }
        counted = counted.saturating_add(1);
        if body_version(body) != Ok(FORMAT_VERSION_WITHOUT_END) {
            only_version_one = false;
        }
        let decoded = match kind {
            MessageKind::Send => SendMessage::decode(body).map(|mut m| {
                m.fill_commit_headers(end_lsn, commit_time_ms);
                txn.sends.push(m)
            }),
            MessageKind::Offsets => OffsetCommitMessage::decode(body).map(|m| txn.offsets.push(m)),
            MessageKind::End => Ok(()),
        };
        if let Err(e) = decoded {
            errors.push(e);
        }
    }
    let whole = match end {
        Some(expected) => expected == counted,
        None => only_version_one,
    };
    if !whole {
        return Assembled::Incomplete { xid, end_lsn, found: counted, expected: end };
    }
    if errors.is_empty() {
        Assembled::Committed(txn)
    } else {
        Assembled::Damaged { txn, errors }
    }
}

/// Postgres's `TransactionIdPrecedes` for normal xids: `a` is older than `b`
/// on the 2^32 circle.
pub fn xid_precedes(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) < 0
}

#[cfg(test)]
mod tests;
