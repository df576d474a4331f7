//! The SQL applier's durable progress: the WAL position up to which every
//! committed transaction is in the log, the applier's producer identity, and
//! the next sequence number per partition.
//!
//! Written after the batches it covers are durable and before the slot is
//! confirmed past them (tmp file, fsync, rename, fsync of the directory), so
//! on restart the slot never lies ahead of it. A missing file means a fresh
//! applier; a corrupt one is an error (the applier would otherwise start new
//! sequences and could write a replayed transaction twice).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

pub const FILE_NAME: &str = "sql-applier.checkpoint";
const MAGIC: &[u8; 4] = b"KGSA";
const VERSION: u8 = 1;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApplierCheckpoint {
    /// Every transaction whose commit ends at or before this is in the log.
    pub applied_lsn: u64,
    /// -1 until the applier has reserved one.
    pub producer_id: i64,
    pub producer_epoch: i16,
    /// Next base sequence per (topic, partition).
    pub next_sequence: BTreeMap<(String, i32), i32>,
}

impl Default for ApplierCheckpoint {
    fn default() -> Self {
        ApplierCheckpoint { applied_lsn: 0, producer_id: -1, producer_epoch: 0, next_sequence: BTreeMap::new() }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{path} is corrupt ({reason}); move it away to start a new SQL producer (records sent from SQL and not yet applied may then be written twice)")]
    Corrupt { path: PathBuf, reason: &'static str },
}

impl ApplierCheckpoint {
    pub fn path(log_dir: &Path) -> PathBuf {
        log_dir.join(FILE_NAME)
    }

    /// Reads the checkpoint in `log_dir`; the default when there is none.
    pub fn load(log_dir: &Path) -> Result<ApplierCheckpoint, CheckpointError> {
        let path = Self::path(log_dir);
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(ApplierCheckpoint::default()),
            Err(source) => return Err(CheckpointError::Io { path, source }),
        };
        Self::decode(&bytes).map_err(|reason| CheckpointError::Corrupt { path, reason })
    }

    /// Replaces the checkpoint atomically and durably.
    pub fn store(&self, log_dir: &Path) -> Result<(), CheckpointError> {
        let path = Self::path(log_dir);
        let tmp = log_dir.join(format!("{FILE_NAME}.tmp"));
        let io = |source| CheckpointError::Io { path: path.clone(), source };
        let mut file = std::fs::File::create(&tmp).map_err(io)?;
        file.write_all(&self.encode()).map_err(io)?;
        file.sync_data().map_err(io)?;
        drop(file);
        std::fs::rename(&tmp, &path).map_err(io)?;
        std::fs::File::open(log_dir).and_then(|d| d.sync_all()).map_err(io)?;
        Ok(())
    }

    fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(32 + self.next_sequence.len() * 24);
        out.extend_from_slice(MAGIC);
        out.push(VERSION);
        out.extend_from_slice(&self.applied_lsn.to_be_bytes());
        out.extend_from_slice(&self.producer_id.to_be_bytes());
        out.extend_from_slice(&self.producer_epoch.to_be_bytes());
        out.extend_from_slice(&(self.next_sequence.len() as u32).to_be_bytes());
        for ((topic, partition), seq) in &self.next_sequence {
            out.extend_from_slice(&(topic.len() as u16).to_be_bytes());
            out.extend_from_slice(topic.as_bytes());
            out.extend_from_slice(&partition.to_be_bytes());
            out.extend_from_slice(&seq.to_be_bytes());
        }
        let crc = crc32c::crc32c(&out);
        out.extend_from_slice(&crc.to_be_bytes());
        out
    }

    fn decode(bytes: &[u8]) -> Result<ApplierCheckpoint, &'static str> {
        if bytes.len() < 4 + 1 + 8 + 8 + 2 + 4 + 4 {
            return Err("too short");
        }
        let (body, crc) = bytes.split_at(bytes.len() - 4);
        if crc32c::crc32c(body) != u32::from_be_bytes([crc[0], crc[1], crc[2], crc[3]]) {
            return Err("checksum mismatch");
        }
        if &body[..4] != MAGIC {
            return Err("bad magic");
        }
        if body[4] != VERSION {
            return Err("unknown version");
        }
        let mut rest = &body[5..];
        let mut take = |n: usize| -> Result<&[u8], &'static str> {
            if rest.len() < n {
                return Err("truncated");
            }
            let (head, tail) = rest.split_at(n);
            rest = tail;
            Ok(head)
        };
        let applied_lsn = u64::from_be_bytes(take(8)?.try_into().map_err(|_| "truncated")?);
        let producer_id = i64::from_be_bytes(take(8)?.try_into().map_err(|_| "truncated")?);
        let producer_epoch = i16::from_be_bytes(take(2)?.try_into().map_err(|_| "truncated")?);
        let count = u32::from_be_bytes(take(4)?.try_into().map_err(|_| "truncated")?);
        let mut next_sequence = BTreeMap::new();
        for _ in 0..count {
            let len = u16::from_be_bytes(take(2)?.try_into().map_err(|_| "truncated")?) as usize;
            let topic = String::from_utf8(take(len)?.to_vec()).map_err(|_| "topic is not UTF-8")?;
            let partition = i32::from_be_bytes(take(4)?.try_into().map_err(|_| "truncated")?);
            let seq = i32::from_be_bytes(take(4)?.try_into().map_err(|_| "truncated")?);
            next_sequence.insert((topic, partition), seq);
        }
        if !rest.is_empty() {
            return Err("trailing bytes");
        }
        Ok(ApplierCheckpoint { applied_lsn, producer_id, producer_epoch, next_sequence })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stores_and_loads() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert_eq!(ApplierCheckpoint::load(dir.path()).expect("absent is fine"), ApplierCheckpoint::default());
        let mut c =
            ApplierCheckpoint { applied_lsn: 0x1_0000_0042, producer_id: 7, producer_epoch: 2, ..Default::default() };
        c.next_sequence.insert(("orders".into(), 0), 10);
        c.next_sequence.insert(("orders".into(), 5), i32::MAX);
        c.store(dir.path()).expect("stores");
        assert_eq!(ApplierCheckpoint::load(dir.path()).expect("loads"), c);
    }

    #[test]
    fn any_damage_is_reported_as_corrupt() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut c = ApplierCheckpoint::default();
        c.next_sequence.insert(("t".into(), 1), 3);
        c.store(dir.path()).expect("stores");
        let path = ApplierCheckpoint::path(dir.path());
        let good = std::fs::read(&path).expect("reads");
        for i in 0..good.len() {
            let mut bad = good.clone();
            bad[i] ^= 0x40;
            std::fs::write(&path, &bad).expect("writes");
            assert!(matches!(ApplierCheckpoint::load(dir.path()), Err(CheckpointError::Corrupt { .. })), "byte {i}");
        }
        std::fs::write(&path, &good[..good.len() - 1]).expect("writes");
        assert!(ApplierCheckpoint::load(dir.path()).is_err());
    }
}
