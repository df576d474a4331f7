//! Test helper for the kill -9 test (`tests/kill9.rs`): appends to a
//! partition log on the real file system with fsync and prints each
//! acknowledged record as `ack <offset> <value>` once its flush returned,
//! until it is killed. Not part of the product.
//!
//! Usage: kafgres-log-crash-writer <partition dir> <seed>

use std::io::Write;
use std::path::PathBuf;

use kafgres_log::storage::memory::SplitMix;
use kafgres_log::{LogConfig, PartitionLog};
use kafgres_record::build::{encode_batch, NewRecord, ProducerStamp};
use kafgres_record::validate_batches;

fn main() {
    let mut args = std::env::args().skip(1);
    let (Some(dir), Some(seed)) = (args.next(), args.next().and_then(|s| s.parse::<u64>().ok())) else {
        eprintln!("usage: kafgres-log-crash-writer <partition dir> <seed>");
        std::process::exit(2);
    };
    // Small segments so that kills land in rolls and checkpoints too, and
    // blocks reserved ahead from 8 KiB on, so they land among reservations
    // and the frees at rolls.
    let config = LogConfig {
        segment_bytes_max: 64 << 10,
        index_interval_bytes: 1 << 10,
        reserve_ahead_bytes: 8 << 10,
        ..LogConfig::default()
    };
    let (mut log, report) = match PartitionLog::open(&PathBuf::from(&dir), config, 0) {
        Ok(opened) => opened,
        Err(e) => {
            eprintln!("open failed: {e}");
            std::process::exit(1);
        }
    };
    let mut out = std::io::stdout().lock();
    let _ =
        writeln!(out, "open {} scanned {} cut {}", log.next_offset(), report.scanned_bytes(), report.truncated_bytes());
    let mut rng = SplitMix(seed);
    let mut n = 0u64;
    loop {
        let mut pending = Vec::new();
        for _ in 0..1 + rng.next_u64() % 3 {
            let records: Vec<NewRecord> = (0..1 + rng.next_u64() % 4)
                .map(|_| {
                    n += 1;
                    let mut value = format!("{seed}:{n}").into_bytes();
                    value.push(b'|');
                    value.resize(value.len() + (rng.next_u64() % 2_000) as usize, b'.');
                    NewRecord { key: None, value: Some(value), headers: vec![], timestamp_ms: n as i64 }
                })
                .collect();
            let batch = encode_batch(&records, ProducerStamp::NONE);
            let headers = validate_batches(&batch).expect("valid batch").headers;
            let appended = log.append(&batch, &headers, 0, 0).expect("append");
            for (i, r) in records.iter().enumerate() {
                let value = r.value.as_deref().unwrap_or_default();
                let id = value.split(|b| *b == b'|').next().unwrap_or_default();
                pending.push(format!("ack {} {}", appended.base_offset + i as i64, String::from_utf8_lossy(id)));
            }
        }
        match rng.next_u64() % 20 {
            0 => log.checkpoint().expect("checkpoint"),
            _ => log.flush().expect("flush"),
        };
        for line in pending {
            let _ = writeln!(out, "{line}");
        }
        let _ = out.flush();
    }
}
