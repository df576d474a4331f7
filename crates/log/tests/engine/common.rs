//! Helpers shared by the storage-engine tests: building batches, opening a
//! log on the in-memory storage, and reading everything back.

use std::path::Path;
use std::sync::Arc;

use kafgres_log::storage::memory::MemStorage;
use kafgres_log::{AppendResult, LogConfig, LogError, OpenReport, PartitionLog, Storage};
use kafgres_record::build::{encode_batch, NewRecord, ProducerStamp};
use kafgres_record::varint::{read_varint, read_varlong};
use kafgres_record::{validate_batches, BatchHeader, BATCH_HEADER_BYTES};

pub const DIR: &str = "/data/topic-0";

pub fn dir() -> &'static Path {
    Path::new(DIR)
}

/// Small segments and a dense index, so a few appends exercise rolls and indexes.
pub fn small_config() -> LogConfig {
    LogConfig { segment_bytes_max: 2_000, index_interval_bytes: 300, ..LogConfig::default() }
}

pub fn open(storage: &MemStorage, config: LogConfig) -> (PartitionLog, OpenReport) {
    open_on(Arc::new(storage.clone()), config)
}

pub fn open_on(storage: Arc<dyn Storage>, config: LogConfig) -> (PartitionLog, OpenReport) {
    PartitionLog::open_with(storage, dir(), config, 0).expect("open")
}

/// One uncompressed batch of `values`, record i stamped `ts + i`.
pub fn batch_of(values: &[Vec<u8>], ts: i64, producer: ProducerStamp) -> Vec<u8> {
    let records: Vec<NewRecord> = values
        .iter()
        .enumerate()
        .map(|(i, v)| NewRecord { key: None, value: Some(v.clone()), headers: vec![], timestamp_ms: ts + i as i64 })
        .collect();
    encode_batch(&records, producer)
}

pub fn append_batch(log: &mut PartitionLog, bytes: Vec<u8>) -> AppendResult {
    let headers = validate_batches(&bytes).expect("valid batch").headers;
    log.append(&bytes, &headers, 0, 0).expect("append")
}

/// Appends one batch of `n` records of `len` bytes tagged `tag`.
pub fn append(log: &mut PartitionLog, n: usize, len: usize, tag: u8, ts: i64) -> AppendResult {
    let values: Vec<Vec<u8>> = (0..n).map(|i| vec![tag.wrapping_add(i as u8); len]).collect();
    append_batch(log, batch_of(&values, ts, ProducerStamp::NONE))
}

/// A stored batch: its header and bytes as read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stored {
    pub header: BatchHeader,
    pub bytes: Vec<u8>,
}

/// Every batch from the log start to the log end, through the read API.
pub fn read_all(log: &PartitionLog) -> Vec<Stored> {
    let end = log.end_position();
    let mut out: Vec<Stored> = Vec::new();
    let mut offset = log.log_start_offset();
    while offset < end.offset {
        let bytes = log.read(offset, 1 << 20, end, true).expect("read").read_to_vec().expect("bytes");
        assert!(!bytes.is_empty(), "no data at offset {offset} below the end {}", end.offset);
        let mut pos = 0;
        while pos + BATCH_HEADER_BYTES <= bytes.len() {
            let header = BatchHeader::parse(&bytes[pos..]).unwrap();
            if pos + header.total_bytes() > bytes.len() {
                break;
            }
            if header.last_offset() >= offset {
                out.push(Stored { header, bytes: bytes[pos..pos + header.total_bytes()].to_vec() });
                offset = header.next_offset();
            }
            pos += header.total_bytes();
        }
    }
    out
}

/// The values of an uncompressed batch's records, in order.
pub fn values_of(batch: &[u8]) -> Vec<Vec<u8>> {
    let header = BatchHeader::parse(batch).unwrap();
    let mut buf = &batch[BATCH_HEADER_BYTES..header.total_bytes()];
    let mut out = Vec::new();
    for _ in 0..header.records_count {
        let len = read_varint(&mut buf).unwrap() as usize;
        let (mut rec, rest) = buf.split_at(len);
        buf = rest;
        rec = &rec[1..];
        read_varlong(&mut rec).unwrap();
        read_varint(&mut rec).unwrap();
        let key_len = read_varint(&mut rec).unwrap();
        if key_len > 0 {
            rec = &rec[key_len as usize..];
        }
        let value_len = read_varint(&mut rec).unwrap();
        out.push(if value_len < 0 { Vec::new() } else { rec[..value_len as usize].to_vec() });
    }
    out
}

/// Checks what a reader relies on: offsets follow on from the log start
/// without gaps, and every offset's read starts at the batch holding it.
pub fn check_invariants(log: &PartitionLog) {
    let all = read_all(log);
    let mut expected = all.first().map(|b| b.header.base_offset);
    for b in &all {
        assert_eq!(Some(b.header.base_offset), expected, "batches follow on");
        expected = Some(b.header.next_offset());
    }
    if let Some(last) = all.last() {
        assert_eq!(last.header.next_offset(), log.next_offset());
    }
    let end = log.end_position();
    for b in &all {
        for offset in [b.header.base_offset, b.header.last_offset()] {
            if offset < log.log_start_offset() {
                continue;
            }
            let got = log.read(offset, 1, end, true).unwrap().read_to_vec().unwrap();
            assert_eq!(&got[..b.bytes.len()], &b.bytes[..], "read at {offset} starts at its batch");
        }
    }
    for segment in log.segments() {
        let mut prev = None;
        for e in segment.offset_index() {
            assert!(u64::from(e.position) < segment.size_bytes().max(1));
            assert!(prev.is_none_or(|p: u32| e.relative_offset > p));
            prev = Some(e.relative_offset);
        }
    }
}

/// Appends `bytes` (validated batches) as a leader at `leader_epoch`.
pub fn append_at_epoch(log: &mut PartitionLog, bytes: &[u8], leader_epoch: i32) -> Result<AppendResult, LogError> {
    let headers = validate_batches(bytes).expect("valid batch").headers;
    log.append(bytes, &headers, leader_epoch, 0)
}

/// One batch of `n` records from a transactional producer.
pub fn txn_batch(n: usize, len: usize, producer: ProducerStamp) -> Vec<u8> {
    let values: Vec<Vec<u8>> = (0..n).map(|i| vec![i as u8; len]).collect();
    let mut b = batch_of(&values, 1_000, producer);
    let attributes = i16::from_be_bytes([b[21], b[22]]) | 0x10;
    b[21..23].copy_from_slice(&attributes.to_be_bytes());
    kafgres_record::rewrite_crc(&mut b);
    b
}

/// The whole batches at the start of `bytes` (a fetch may end inside one).
pub fn whole_batches(bytes: &[u8]) -> &[u8] {
    let mut pos = 0;
    while let Some((_, size)) = kafgres_record::peek_offset_and_size(&bytes[pos..]) {
        if pos + size > bytes.len() {
            break;
        }
        pos += size;
    }
    &bytes[..pos]
}

/// A follower's fetch: the leader's batches from the follower's log end, up
/// to `max_bytes` (at least one batch), appended as they are. Returns
/// whether anything was copied.
pub fn fetch_into(leader: &PartitionLog, follower: &mut PartitionLog, max_bytes: u64) -> bool {
    let from = follower.next_offset();
    if from >= leader.next_offset() {
        return false;
    }
    let slice = leader.read(from, max_bytes, leader.end_position(), true).expect("leader read");
    let bytes = slice.read_to_vec().expect("leader bytes");
    let bytes = whole_batches(&bytes);
    if bytes.is_empty() {
        return false;
    }
    let headers = validate_batches(bytes).expect("the leader's batches are valid").headers;
    follower.append_replicated(bytes, &headers, 0).expect("append_replicated");
    true
}

/// Every file of the partition directory (the written image), by name.
pub fn files(storage: &MemStorage) -> std::collections::BTreeMap<String, Vec<u8>> {
    storage
        .list_dir(dir())
        .expect("list")
        .into_iter()
        .map(|name| {
            let bytes = storage.read_file(&dir().join(&name)).expect("file");
            (name, bytes)
        })
        .collect()
}

/// The leader epoch history of `log` as `(epoch, start)` pairs.
pub fn epochs_of(log: &PartitionLog) -> Vec<(i32, i64)> {
    log.leader_epochs().entries().iter().map(|e| (e.epoch, e.start_offset)).collect()
}

/// The history a log's batches imply: the first batch of each higher epoch,
/// the first entry starting no lower than the log start.
pub fn epochs_implied_by(batches: &[Stored], log_start: i64) -> Vec<(i32, i64)> {
    let mut out: Vec<(i32, i64)> = Vec::new();
    for b in batches {
        if out.last().is_none_or(|l| b.header.partition_leader_epoch > l.0) {
            out.push((b.header.partition_leader_epoch, b.header.base_offset.max(log_start)));
        }
    }
    out
}
