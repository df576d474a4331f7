//! kill -9 test: a child process appends with fsync and prints each
//! acknowledged record; it is killed with SIGKILL at random moments ~20
//! times, and after each kill the log, reopened, must hold every
//! acknowledged record at its offset, in order, without duplicates, and
//! accept appends again (the next child appends to it).

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use kafgres_log::storage::memory::SplitMix;
use kafgres_log::{LogConfig, PartitionLog};
use kafgres_record::varint::{read_varint, read_varlong};
use kafgres_record::{BatchHeader, BATCH_HEADER_BYTES};

const ROUNDS: u64 = 20;
const TIME_BUDGET: Duration = Duration::from_secs(25);

/// Every record in the log as (offset, value id), via the read API.
fn records(log: &PartitionLog) -> Vec<(i64, String)> {
    let end = log.end_position();
    let mut out = Vec::new();
    let mut offset = log.log_start_offset();
    while offset < end.offset {
        let bytes = log.read(offset, 1 << 20, end, true).unwrap().read_to_vec().unwrap();
        let mut pos = 0;
        while pos + BATCH_HEADER_BYTES <= bytes.len() {
            let h = BatchHeader::parse(&bytes[pos..]).unwrap();
            if pos + h.total_bytes() > bytes.len() {
                break;
            }
            let mut buf = &bytes[pos + BATCH_HEADER_BYTES..pos + h.total_bytes()];
            for i in 0..h.records_count {
                let len = read_varint(&mut buf).unwrap() as usize;
                let (mut rec, rest) = buf.split_at(len);
                buf = rest;
                rec = &rec[1..];
                read_varlong(&mut rec).unwrap();
                read_varint(&mut rec).unwrap();
                assert_eq!(read_varint(&mut rec), Some(-1), "no key");
                let value_len = read_varint(&mut rec).unwrap() as usize;
                let value = &rec[..value_len];
                let id = value.split(|b| *b == b'|').next().unwrap();
                out.push((h.base_offset + i64::from(i), String::from_utf8(id.to_vec()).unwrap()));
            }
            offset = h.next_offset();
            pos += h.total_bytes();
        }
    }
    out
}

#[test]
fn acknowledged_records_survive_kill_9() {
    let dir = tempfile::tempdir().unwrap();
    let partition = dir.path().join("topic-0");
    let seed0 = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap().as_nanos() as u64;
    eprintln!("kill9 seed {seed0}");
    let mut rng = SplitMix(seed0);
    let started = Instant::now();
    let mut acked: HashMap<i64, String> = HashMap::new();
    let mut rounds = 0;
    while rounds < ROUNDS && started.elapsed() < TIME_BUDGET {
        rounds += 1;
        let seed = seed0.wrapping_add(rounds);
        let mut child = Command::new(env!("CARGO_BIN_EXE_kafgres-log-crash-writer"))
            .arg(&partition)
            .arg(seed.to_string())
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn the writer");
        let stdout = child.stdout.take().unwrap();
        let (opened_tx, opened_rx) = std::sync::mpsc::channel();
        let reader = std::thread::spawn(move || {
            // Only whole lines count: a line cut by the kill was never printed.
            let mut lines = Vec::new();
            let mut r = BufReader::new(stdout);
            let mut line = Vec::new();
            while r.read_until(b'\n', &mut line).unwrap_or(0) > 0 {
                if line.ends_with(b"\n") {
                    lines.push(String::from_utf8_lossy(&line[..line.len() - 1]).into_owned());
                    if lines.len() == 1 {
                        let _ = opened_tx.send(());
                    }
                }
                line.clear();
            }
            lines
        });
        // The kill lands while the writer appends, not while it starts: a
        // slow start on a loaded machine would otherwise be killed before
        // it opened its log (a round that tests nothing).
        let _ = opened_rx.recv_timeout(Duration::from_secs(30));
        std::thread::sleep(Duration::from_millis(30 + rng.next_u64() % 200));
        child.kill().expect("SIGKILL"); // std sends SIGKILL on Unix
        child.wait().unwrap();
        let lines = reader.join().unwrap();
        assert!(
            lines.first().is_some_and(|l| l.starts_with("open ")),
            "round {rounds}: the writer did not open: {lines:?}"
        );
        for line in &lines[1..] {
            let mut parts = line.split(' ');
            assert_eq!(parts.next(), Some("ack"), "{line}");
            let offset: i64 = parts.next().unwrap().parse().unwrap();
            let id = parts.next().unwrap().to_string();
            assert!(acked.insert(offset, id).is_none(), "round {rounds}: offset {offset} acknowledged twice");
        }

        let config = LogConfig { segment_bytes_max: 64 << 10, index_interval_bytes: 1 << 10, ..LogConfig::default() };
        let (log, _) = PartitionLog::open(&partition, config, 0).unwrap();
        let stored = records(&log);
        for (i, (offset, _)) in stored.iter().enumerate() {
            assert_eq!(*offset, i as i64, "round {rounds}: offsets follow on from 0");
        }
        let by_offset: HashMap<i64, &String> = stored.iter().map(|(o, id)| (*o, id)).collect();
        for (offset, id) in &acked {
            assert_eq!(
                by_offset.get(offset).copied(),
                Some(id),
                "round {rounds}: acknowledged offset {offset} lost or changed"
            );
        }
        let mut seen = HashMap::new();
        for (offset, id) in &stored {
            assert!(seen.insert(id.clone(), *offset).is_none(), "round {rounds}: record {id} stored twice");
        }
        // Within one writer's run, records are stored in the order written.
        let mut last_n: HashMap<&str, u64> = HashMap::new();
        for (_, id) in &stored {
            let (run, n) = id.split_once(':').unwrap();
            let n: u64 = n.parse().unwrap();
            assert!(last_n.insert(run, n).is_none_or(|prev| prev < n), "round {rounds}: {id} out of order");
        }
    }
    assert!(rounds >= 10, "only {rounds} rounds fitted in the time budget");
    assert!(acked.len() > 20, "the writer acknowledged only {} records", acked.len());
    eprintln!("kill9: {rounds} kills, {} acknowledged records checked", acked.len());
}
