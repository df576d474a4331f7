//! Helpers shared by the storage-engine tests: building batches, opening a
//! log on the in-memory storage, and reading everything back.

use std::path::Path;
use std::sync::Arc;

use kafgres_log::storage::memory::MemStorage;
use kafgres_log::{AppendResult, LogConfig, OpenReport, PartitionLog, Storage};
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
