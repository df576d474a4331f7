//! Append throughput of one partition log, in process: no network, no
//! client, the broker's own append path and group-commit flusher
//! (`Partition`). `--writers` tasks each append one batch at a time of
//! `--batch-bytes` (split into `--records` records) and, with `--policy
//! fsync`, wait until it is durable before the next, as an acks=all produce
//! waits; with `page_cache` they do not wait. Prints one line:
//!
//! ```text
//! figure=log.append policy=fsync batch_bytes=1024 writers=8 seconds=5.001 mb_s=.. batches_s=.. flushes_s=.. batches_per_flush=.. cpu_s=.. mb_per_cpu_s=..
//! ```
//!
//! `cpu_s` is the process's CPU time (user + system) during the appends:
//! with the batch encoded once, mostly the kernel's write and flush work.
//!
//! The log lives in a fresh directory under `--dir`, removed at the end.
//! Runs stop after `--seconds` or `--max-bytes`, whichever comes first, so a
//! fast disk cannot fill up. scripts/bench/log_append.py runs it next to fio.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kafgres_broker::config::FlushPolicy;
use kafgres_broker::metrics::BrokerMetrics;
use kafgres_broker::partition::{AppendOutcome, Housekeeping, Partition};
use kafgres_log::{LogConfig, PartitionLog};
use kafgres_record::build::{encode_batch, NewRecord, ProducerStamp};
use kafgres_record::validate_batches;

struct Args {
    dir: PathBuf,
    policy: FlushPolicy,
    batch_bytes: usize,
    records: usize,
    writers: usize,
    seconds: f64,
    max_bytes: u64,
    /// `kafgres.flush_delay`, in microseconds.
    flush_delay_us: u64,
    /// `LogConfig::reserve_ahead_bytes` (0: no block reservation).
    reserve_ahead_bytes: u64,
}

fn usage() -> ! {
    eprintln!(
        "usage: kafgres-log-bench --dir DIR [--policy fsync|page_cache] [--batch-bytes N] [--records N] \
         [--writers N] [--seconds S] [--max-bytes N] [--flush-delay-us N] [--reserve-ahead-bytes N]"
    );
    std::process::exit(2)
}

fn parse() -> Args {
    let mut args = Args {
        dir: PathBuf::new(),
        policy: FlushPolicy::Fsync,
        batch_bytes: 1024,
        records: 1,
        writers: 8,
        seconds: 5.0,
        max_bytes: 4 << 30,
        flush_delay_us: 0,
        reserve_ahead_bytes: LogConfig::default().reserve_ahead_bytes,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().unwrap_or_else(|| usage());
        let number = || value.parse::<u64>().unwrap_or_else(|_| usage());
        match flag.as_str() {
            "--dir" => args.dir = PathBuf::from(&value),
            "--policy" => {
                args.policy = match value.as_str() {
                    "fsync" => FlushPolicy::Fsync,
                    "page_cache" => FlushPolicy::PageCache,
                    _ => usage(),
                }
            }
            "--batch-bytes" => args.batch_bytes = number() as usize,
            "--records" => args.records = number().max(1) as usize,
            "--writers" => args.writers = number().max(1) as usize,
            "--seconds" => args.seconds = value.parse().unwrap_or_else(|_| usage()),
            "--max-bytes" => args.max_bytes = number(),
            "--flush-delay-us" => args.flush_delay_us = number(),
            "--reserve-ahead-bytes" => args.reserve_ahead_bytes = number(),
            _ => usage(),
        }
    }
    if args.dir.as_os_str().is_empty() {
        usage()
    }
    args
}

fn main() {
    let args = parse();
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build();
    let runtime = runtime.unwrap_or_else(|e| {
        eprintln!("kafgres-log-bench: cannot start a runtime: {e}");
        std::process::exit(1)
    });
    let dir = args.dir.join(format!("log-bench-{}", std::process::id()));
    let result = runtime.block_on(run(&args, &dir));
    let _ = std::fs::remove_dir_all(&dir);
    if let Err(e) = result {
        eprintln!("kafgres-log-bench: {e}");
        std::process::exit(1);
    }
}

async fn run(args: &Args, dir: &std::path::Path) -> Result<(), String> {
    let config = LogConfig { reserve_ahead_bytes: args.reserve_ahead_bytes, ..LogConfig::default() };
    let (log, _) = PartitionLog::open(dir, config, kafgres_broker::now_ms())
        .map_err(|e| format!("opening {}: {e}", dir.display()))?;
    let metrics = BrokerMetrics::leaked();
    let housekeeping = Housekeeping::default();
    let settings = kafgres_broker::partition::PartitionSettings {
        policy: kafgres_broker::settings::SharedFlushPolicy::new(args.policy),
        flush_delay: kafgres_broker::settings::SharedFlushDelay::new(std::time::Duration::from_micros(
            args.flush_delay_us,
        )),
        metrics,
        replication: std::sync::Arc::new(kafgres_broker::replication::ReplicationState::new(
            0,
            None,
            std::time::Duration::from_secs(10),
        )),
    };
    let partition = Partition::start("bench".into(), 0, log, &housekeeping, &Default::default(), settings);
    let record_bytes = (args.batch_bytes / args.records).max(1);
    let records: Vec<NewRecord> = (0..args.records)
        .map(|i| NewRecord { value: Some(vec![(i % 251) as u8; record_bytes]), timestamp_ms: 1, ..Default::default() })
        .collect();
    let template = encode_batch(&records, ProducerStamp::NONE);
    let headers = validate_batches(&template).map_err(|e| e.to_string())?.headers;
    let stop = Arc::new(AtomicBool::new(false));
    let bytes = Arc::new(AtomicU64::new(0));
    let batches = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let cpu_before = process_cpu_seconds();
    let mut tasks = Vec::new();
    for _ in 0..args.writers {
        let (partition, stop, bytes, batches) =
            (Arc::clone(&partition), Arc::clone(&stop), Arc::clone(&bytes), Arc::clone(&batches));
        let (template, headers, policy, max_bytes) = (template.clone(), headers.clone(), args.policy, args.max_bytes);
        tasks.push(tokio::spawn(async move {
            let batch = template;
            while !stop.load(Ordering::Relaxed) && bytes.load(Ordering::Relaxed) < max_bytes {
                let end = match partition.append(&batch, &headers, kafgres_broker::now_ms()) {
                    Ok(AppendOutcome::Appended(appended)) => appended.last_offset + 1,
                    other => return Err(format!("append: {other:?}")),
                };
                if policy == FlushPolicy::Fsync {
                    partition.wait_durable(end).await.map_err(|e| e.to_string())?;
                } else {
                    // Nothing to wait for: let the timer and the other writers run.
                    tokio::task::yield_now().await;
                }
                bytes.fetch_add(batch.len() as u64, Ordering::Relaxed);
                batches.fetch_add(1, Ordering::Relaxed);
            }
            Ok::<(), String>(())
        }));
    }
    tokio::time::sleep(Duration::from_secs_f64(args.seconds)).await;
    stop.store(true, Ordering::Relaxed);
    for task in tasks {
        task.await.map_err(|e| e.to_string())??;
    }
    let elapsed = started.elapsed().as_secs_f64();
    let cpu_s = process_cpu_seconds() - cpu_before;
    let mb = bytes.load(Ordering::Relaxed) as f64 / 1e6;
    let flushes = metrics.flushes.load(Ordering::Relaxed);
    let flushed = metrics.flushed_batches.load(Ordering::Relaxed);
    let policy = match args.policy {
        FlushPolicy::Fsync => "fsync",
        FlushPolicy::PageCache => "page_cache",
    };
    println!(
        "figure=log.append policy={policy} batch_bytes={} records_per_batch={} writers={} seconds={elapsed:.3} \
         mb_s={:.1} batches_s={:.0} flushes_s={:.0} batches_per_flush={:.2} cpu_s={cpu_s:.3} mb_per_cpu_s={:.0}",
        template.len(),
        args.records,
        args.writers,
        mb / elapsed,
        batches.load(Ordering::Relaxed) as f64 / elapsed,
        flushes as f64 / elapsed,
        if flushes == 0 { 0.0 } else { flushed as f64 / flushes as f64 },
        if cpu_s > 0.0 { mb / cpu_s } else { 0.0 },
    );
    partition.close().map_err(|e| e.to_string())?;
    Ok(())
}

/// This process's CPU time so far, user and system, every thread.
fn process_cpu_seconds() -> f64 {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage fills the struct it is given; RUSAGE_SELF is always valid.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr()) };
    if rc != 0 {
        return 0.0;
    }
    // SAFETY: initialised by the successful call above.
    let usage = unsafe { usage.assume_init() };
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    seconds(usage.ru_utime) + seconds(usage.ru_stime)
}
