//! The open files a partition holds: one per segment (its `.log`). The index
//! files are written behind, at a roll, a checkpoint or a close, and never
//! held open (see `kafgres_log::index`), so 10,000 partitions fit a 20,000
//! descriptor limit. A test binary of its own: it counts this process's
//! open files, which other tests running alongside would change.

#[allow(dead_code)]
#[path = "engine/common.rs"]
mod common;

use kafgres_log::{LogConfig, PartitionLog};

fn open_files() -> usize {
    std::fs::read_dir("/proc/self/fd").expect("/proc/self/fd").count()
}

#[test]
fn a_partition_holds_one_descriptor_per_segment_and_its_indexes_none() {
    let root = tempfile::tempdir().unwrap();
    let config = LogConfig { segment_bytes_max: 4_096, index_interval_bytes: 600, ..LogConfig::default() };
    let before = open_files();
    let mut logs = Vec::new();
    for p in 0..20 {
        let (mut log, _) = PartitionLog::open(&root.path().join(format!("t-{p}")), config, 0).unwrap();
        for i in 0..10u8 {
            common::append(&mut log, 2, 500, i, 1_000 + i64::from(i));
        }
        logs.push(log);
    }
    let segments: usize = logs.iter().map(|l| l.segments().len()).sum();
    assert!(segments >= 40, "the appends rolled segments: {segments}");
    assert!(logs.iter().all(|l| l.segments().iter().all(|s| !s.offset_index().is_empty())), "indexes have entries");
    assert_eq!(open_files() - before, segments, "one descriptor per segment");

    // A checkpoint writes the active segments' index files, and a reopen
    // loads them (no scan) and holds as many descriptors as before.
    let ends: Vec<_> = logs.iter_mut().map(|l| l.checkpoint().unwrap()).collect();
    drop(logs);
    assert_eq!(open_files(), before, "a closed log holds nothing");
    let mut reopened = Vec::new();
    for (p, end) in ends.iter().enumerate() {
        let (log, report) = PartitionLog::open(&root.path().join(format!("t-{p}")), config, 0).unwrap();
        assert_eq!(report.scanned_bytes(), 0, "t-{p}: the index files were complete: {report:?}");
        assert_eq!(log.end_position(), *end);
        reopened.push(log);
    }
    assert_eq!(open_files() - before, segments);
}
