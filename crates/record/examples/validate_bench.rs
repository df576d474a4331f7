//! Validation speed of a produce's batches, in process: one batch of 1 MB of
//! records of `--size` bytes (default 100), validated as a produce's records
//! are (`validate_produced_batches`: CRC-32C, then every record's framing),
//! repeatedly for about 2 s. Prints nanoseconds per record and GB/s.
//!
//! ```sh
//! cargo run --release -p kafgres-record --example validate_bench -- 100
//! ```

use std::time::Instant;

use kafgres_record::build::{encode_batch, NewRecord, ProducerStamp};
use kafgres_record::{validate_produced_batches, DecompressLimit};

fn main() {
    let size: usize = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(100);
    let count = ((1 << 20) / (size + 10)).max(1);
    let records: Vec<NewRecord> = (0..count)
        .map(|i| NewRecord {
            key: None,
            value: Some(vec![(i % 251) as u8; size]),
            headers: vec![],
            timestamp_ms: 1_700_000_000_000 + (i / 50) as i64,
        })
        .collect();
    let batch = encode_batch(&records, ProducerStamp::NONE);
    let limit = DecompressLimit { bytes_max: 64 << 20 };
    let started = Instant::now();
    let mut rounds = 0u64;
    while started.elapsed().as_secs_f64() < 2.0 {
        for _ in 0..16 {
            let validated = validate_produced_batches(std::hint::black_box(&batch), limit).expect("a valid batch");
            std::hint::black_box(validated);
        }
        rounds += 16;
    }
    let seconds = started.elapsed().as_secs_f64();
    let per_record_ns = seconds * 1e9 / (rounds as f64 * count as f64);
    let gb_s = rounds as f64 * batch.len() as f64 / seconds / 1e9;
    println!(
        "figure=record.validate size={size} records_per_batch={count} ns_per_record={per_record_ns:.2} gb_s={gb_s:.2}"
    );
}
