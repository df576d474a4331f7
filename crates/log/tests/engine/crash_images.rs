//! Crash images: the files as a crash could leave them, cut at every byte
//! of the unflushed tail and at random points, with garbage or torn pages,
//! and what recovery must make of them: every flushed batch kept, byte for
//! byte; nothing but a prefix of what was appended; appends continue.

use kafgres_log::checkpoint::RECOVERY_POINT_FILE;
use kafgres_log::segment::{index_file_name, segment_file_name, time_index_file_name};
use kafgres_log::storage::memory::{CrashMode, MemStorage, SplitMix};
use kafgres_log::{LogConfig, PartitionLog};

use crate::common::*;

/// Appended batches (as stored) and how many of them are known durable.
struct Workload {
    appended: Vec<Vec<u8>>,
    durable: usize,
}

/// Random appends with flushes, checkpoints and rolls, tracking durability.
fn run_workload(log: &mut PartitionLog, rng: &mut SplitMix, steps: usize) -> Workload {
    let mut w = Workload { appended: read_all(log).into_iter().map(|b| b.bytes).collect(), durable: 0 };
    w.durable = w.appended.len();
    for _ in 0..steps {
        match rng.next_u64() % 10 {
            0 => {
                log.flush().unwrap();
                w.durable = w.appended.len();
            }
            1 => {
                log.checkpoint().unwrap();
                w.durable = w.appended.len();
            }
            _ => {
                let segments = log.segments().len();
                let n = 1 + (rng.next_u64() % 3) as usize;
                let len = 10 + (rng.next_u64() % 400) as usize;
                let r = append(log, n, len, rng.next_u64() as u8, 1_000 + rng.next_u64() as i64 % 100);
                if log.segments().len() > segments {
                    w.durable = w.appended.len();
                }
                let stored = log.read(r.base_offset, 1, log.end_position(), true).unwrap().read_to_vec().unwrap();
                w.appended.push(stored);
            }
        }
    }
    w
}

/// Reopens `image` and checks it against the workload; returns the log.
fn check_recovered(image: &MemStorage, w: &Workload, what: &str) -> PartitionLog {
    let (mut log, _) = open(image, small_config());
    let got: Vec<Vec<u8>> = read_all(&log).into_iter().map(|b| b.bytes).collect();
    assert!(got.len() >= w.durable, "{what}: {} batches recovered, {} were durable", got.len(), w.durable);
    assert!(got.len() <= w.appended.len(), "{what}: more batches than appended");
    for (i, (a, b)) in got.iter().zip(&w.appended).enumerate() {
        assert_eq!(a, b, "{what}: batch {i} differs");
    }
    check_invariants(&log);
    let r = append(&mut log, 1, 5, 9, 2_000);
    assert_eq!(
        r.base_offset,
        got.iter().map(|b| kafgres_record::BatchHeader::parse(b).unwrap().records_count as i64).sum::<i64>()
    );
    log
}

#[test]
fn every_cut_of_the_unflushed_tail_recovers_the_whole_batches_before_it() {
    for with_recovery_point in [true, false] {
        let storage = MemStorage::new();
        let config = LogConfig { segment_bytes_max: 1 << 20, index_interval_bytes: 100, ..LogConfig::default() };
        let (mut log, _) = open(&storage, config);
        for i in 0..3 {
            append(&mut log, 2, 30, i, 1_000);
        }
        log.checkpoint().unwrap();
        let flushed = log.end_position();
        let mut ends = vec![flushed.byte_pos];
        for i in 0..4 {
            ends.push(append(&mut log, 1 + i as usize, 20, i, 1_100).end.byte_pos);
        }
        let image = storage.crash(CrashMode::KeepUnsynced);
        if !with_recovery_point {
            image.delete_file(&dir().join(RECOVERY_POINT_FILE));
        }
        let seg = dir().join(segment_file_name(0));
        let full = image.read_file(&seg).unwrap();
        for cut in flushed.byte_pos..=full.len() as u64 {
            let crashed = image.crash(CrashMode::KeepUnsynced);
            crashed.write_file(&seg, &full[..cut as usize]);
            let (log, report) = open(&crashed, config);
            let kept = *ends.iter().filter(|e| **e <= cut).max().unwrap();
            assert_eq!(log.size_bytes(), kept, "cut at {cut}");
            assert_eq!(report.truncated_bytes(), cut - kept, "cut at {cut}");
            assert_eq!(crashed.read_file(&seg).unwrap().len() as u64, kept, "the file itself is cut");
            check_invariants(&log);
        }
    }
}

#[test]
fn garbage_after_a_random_cut_is_cut_too() {
    let mut rng = SplitMix(7);
    for round in 0..200 {
        let storage = MemStorage::new();
        let (mut log, _) = open(&storage, small_config());
        let w = run_workload(&mut log, &mut rng, 30);
        drop(log);
        let image = storage.crash(CrashMode::KeepUnsynced);
        let (probe, _) = open(&image.crash(CrashMode::KeepUnsynced), small_config());
        let last = probe.segments().last().unwrap().base_offset();
        let seg = dir().join(segment_file_name(last));
        let data = image.read_file(&seg).unwrap();
        // Bytes below the recovery point were fsynced and are trusted: a
        // crash cannot change them. Half the rounds remove the recovery
        // point, making every byte fair game for a full scan.
        let trusted = match (round % 2, probe.recovery_point()) {
            (0, Some(rp)) if rp.segment_base == last => rp.byte_pos as usize,
            (0, _) => 0,
            _ => {
                image.delete_file(&dir().join(RECOVERY_POINT_FILE));
                0
            }
        };
        drop(probe);
        let cut = trusted + (rng.next_u64() as usize) % (data.len() - trusted + 1);
        let mut damaged = data[..cut].to_vec();
        let garbage = (rng.next_u64() % 300) as usize;
        match rng.next_u64() % 3 {
            0 => damaged.extend((0..garbage).map(|_| rng.next_u64() as u8)),
            1 => damaged.extend(std::iter::repeat_n(0u8, garbage)),
            // A stale copy of earlier bytes: valid-looking batches at the wrong offsets.
            _ => damaged.extend_from_slice(&data[..garbage.min(data.len())]),
        }
        image.write_file(&seg, &damaged);
        // Only a prefix is owed: the cut may remove flushed bytes past the
        // recovery point (a disk losing flushed data), which no recovery
        // can bring back.
        let owed = Workload { appended: w.appended.clone(), durable: 0 };
        check_recovered(&image, &owed, &format!("round {round}, cut {cut} of {}", data.len()));
    }
}

#[test]
fn power_losses_with_torn_pages_keep_every_flushed_batch() {
    let mut rng = SplitMix(11);
    for seed in 0..300u64 {
        let storage = MemStorage::new();
        let (mut log, _) = open(&storage, small_config());
        let w = run_workload(&mut log, &mut rng, 40);
        for mode in [CrashMode::Torn { seed }, CrashMode::DropUnsynced, CrashMode::KeepUnsynced] {
            let log = check_recovered(&storage.crash(mode), &w, &format!("seed {seed}, {mode:?}"));
            if mode == CrashMode::KeepUnsynced {
                assert_eq!(log.next_offset() - 1, w.appended.iter().map(|b| values_of(b).len() as i64).sum::<i64>());
            }
        }
        // A second crash right after recovery loses nothing recovery kept.
        let crashed = storage.crash(CrashMode::Torn { seed });
        let (first, _) = open(&crashed, small_config());
        let kept = read_all(&first);
        drop(first);
        let (second, _) = open(&crashed.crash(CrashMode::DropUnsynced), small_config());
        assert_eq!(read_all(&second), kept, "seed {seed}: recovery made what it kept durable");
    }
}

#[test]
fn torn_index_files_of_the_active_segment_are_rebuilt_from_the_log() {
    let storage = MemStorage::new();
    let config = LogConfig { segment_bytes_max: 1 << 20, index_interval_bytes: 50, ..LogConfig::default() };
    let (mut log, _) = open(&storage, config);
    for i in 0..5 {
        append(&mut log, 1, 40, i, 1_000 + i64::from(i));
    }
    log.checkpoint().unwrap();
    for i in 5..12 {
        append(&mut log, 1, 40, i, 1_000 + i64::from(i));
    }
    let want = read_all(&log);
    drop(log);
    let image = storage.crash(CrashMode::KeepUnsynced);
    for name in [index_file_name(0), time_index_file_name(0)] {
        let path = dir().join(&name);
        let full = image.read_file(&path).unwrap();
        for cut in 0..=full.len() {
            for tail in [&[][..], &[0xFF; 5][..]] {
                let crashed = image.crash(CrashMode::KeepUnsynced);
                crashed.write_file(&path, &[&full[..cut], tail].concat());
                let (log, _) = open(&crashed, config);
                assert_eq!(read_all(&log), want, "{name} cut at {cut}");
                check_invariants(&log);
                assert_eq!(
                    log.offset_for_timestamp(1_007, log.end_position()).unwrap(),
                    Some((7, 1_007)),
                    "{name} cut at {cut}"
                );
            }
        }
    }
}
