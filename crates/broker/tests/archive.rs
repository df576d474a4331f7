//! Segment archiving (`kafgres.archive_command`): every closed segment's log
//! and indexes reach the archive, in order, byte for byte, the active one
//! never; a failing command is retried and holds the segments it has not
//! archived from DeleteRecords and retention, which delete them once a
//! working command has archived them.

mod common;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use kafgres_broker::settings::Reloadable;
use kafgres_broker::BrokerConfig;

async fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn copy_command(archive: &Path) -> String {
    format!("mkdir -p \"{0}/$(dirname %f)\" && cp %p \"{0}/%f\"", archive.display())
}

fn segment_logs(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|entries| entries.filter_map(|e| e.ok()).map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    names.retain(|n| n.ends_with(".log"));
    names.sort();
    names
}

/// A topic that keeps its records by time: the test records' timestamps are
/// old enough for the default retention.
async fn create_kept_topic(client: &mut Client, topic: &str) {
    use kafka_protocol::messages::create_topics_request::CreatableTopicConfig;
    use kafka_protocol::messages::CreateTopicsRequest;
    use kafka_protocol::protocol::StrBytes;
    let config = CreatableTopicConfig::default()
        .with_name(StrBytes::from_static_str("retention.ms"))
        .with_value(Some(StrBytes::from_static_str("-1")));
    let request = CreateTopicsRequest::default().with_topics(vec![creatable(topic, 1, 1).with_configs(vec![config])]);
    assert_eq!(client.call(7, &request).await.topics[0].error_code, 0);
}

async fn start(archive_command: Option<String>) -> TestBroker {
    let dir = tempfile::tempdir().expect("tempdir");
    let config =
        BrokerConfig { segment_bytes_max: 1024, archive_command, ..BrokerConfig::for_tests(dir.path().to_path_buf()) };
    TestBroker::start_with(dir, Arc::default(), config).await
}

#[tokio::test]
async fn closed_segments_are_archived_whole_and_the_active_one_is_not() {
    let archive = tempfile::tempdir().expect("tempdir");
    let journal = archive.path().join("journal");
    let command = format!("{} && echo %f >> \"{}\"", copy_command(archive.path()), journal.display());
    let broker = start(Some(command)).await;
    let board = &broker.broker.context().config.metrics.archive;
    let mut client = broker.client().await;
    create_kept_topic(&mut client, "archived").await;
    for i in 0..12 {
        let answer = produce(&mut client, 9, "archived", 0, -1, batch(&records(&format!("r{i}"), 8))).await;
        assert_eq!(answer.error_code, 0);
    }
    let partition_dir = broker.dir.path().join("archived-0");
    let logs = segment_logs(&partition_dir);
    assert!(logs.len() >= 3, "the segments rolled: {logs:?}");
    let closed = &logs[..logs.len() - 1];
    eventually("every closed segment is archived", || board.status().segments_archived == closed.len() as u64).await;
    let mut files = 0;
    for name in closed {
        // A segment too small for an index entry has no index files.
        for file in [name.clone(), name.replace(".log", ".index"), name.replace(".log", ".timeindex")] {
            let Ok(original) = std::fs::read(partition_dir.join(&file)) else {
                assert!(!file.ends_with(".log"), "{file} is missing from the log");
                continue;
            };
            let copy = std::fs::read(archive.path().join("archived-0").join(&file)).expect("in the archive");
            assert_eq!(original, copy, "{file} archived byte for byte");
            files += 1;
        }
    }
    let active = logs.last().expect("an active segment");
    assert!(!archive.path().join("archived-0").join(active).exists(), "the active segment was archived");
    // The topic id goes with the first segment, once: a restore past the
    // base backup needs it to load the partition.
    let metadata = std::fs::read(partition_dir.join("partition.metadata")).expect("partition.metadata");
    let archived = std::fs::read(archive.path().join("archived-0/partition.metadata")).expect("archived");
    assert_eq!(metadata, archived);
    let journal_lines = std::fs::read_to_string(&journal).expect("journal");
    let lines: Vec<&str> = journal_lines.lines().collect();
    assert_eq!(lines.first(), Some(&"archived-0/partition.metadata"), "{lines:?}");
    assert_eq!(lines.iter().filter(|l| l.ends_with("partition.metadata")).count(), 1, "{lines:?}");
    files += 1;
    let status = board.status();
    assert_eq!(status.files_archived, files);
    assert_eq!(status.failures, 0);
    assert_eq!(status.backlog_segments, 0);
    assert!(status.last_archived.starts_with("archived-0/"), "{status:?}");
    let checkpoint = std::fs::read_to_string(partition_dir.join("archived-offset-checkpoint")).expect("checkpoint");
    // `<next base offset> <timeline>`.
    let next: i64 = checkpoint.split_whitespace().next().and_then(|o| o.parse().ok()).expect("an offset");
    assert_eq!(checkpoint.split_whitespace().nth(1), Some("0"), "the timeline (0 in tests)");
    assert_eq!(format!("{next:020}.log"), *active, "the checkpoint names the first segment not archived");
    broker.shutdown().await;
}

#[tokio::test]
async fn a_failing_command_is_retried_and_holds_its_segments_from_deletion() {
    let broker = start(Some("echo no space left >&2; exit 3".into())).await;
    let board = &broker.broker.context().config.metrics.archive;
    let mut client = broker.client().await;
    create_kept_topic(&mut client, "held").await;
    for i in 0..10 {
        assert_eq!(produce(&mut client, 9, "held", 0, -1, batch(&records(&format!("h{i}"), 8))).await.error_code, 0);
    }
    let partition_dir = broker.dir.path().join("held-0");
    let before = segment_logs(&partition_dir);
    assert!(before.len() >= 3, "{before:?}");
    eventually("the failure is counted and retried", || board.status().failures >= 2).await;
    let closed = before.len() as u64 - 1;
    eventually("every closed segment is in the backlog", || board.status().backlog_segments == closed).await;
    let status = board.status();
    assert_eq!(status.segments_archived, 0);
    assert!(status.last_failure.contains("no space left"), "{status:?}");

    // DeleteRecords moves the log start, but the unarchived files stay.
    let partition = broker.broker.context().topics.partition("held", 0).expect("partition");
    let end = partition.high_watermark().offset;
    assert_eq!(partition.delete_records(end).expect("deleted"), end);
    assert_eq!(segment_logs(&partition_dir), before, "unarchived segments were deleted");

    // A working command archives them; then retention deletes them.
    let archive = tempfile::tempdir().expect("tempdir");
    let reloaded = Reloadable {
        archive_command: Some(copy_command(archive.path())),
        ..Reloadable::from(broker.broker.context().config.as_ref())
    };
    broker.broker.reload(&reloaded);
    eventually("the held segments are archived", || board.status().segments_archived == before.len() as u64 - 1).await;
    for name in &before[..before.len() - 1] {
        assert!(archive.path().join("held-0").join(name).exists(), "{name} is not in the archive");
    }
    eventually("retention deletes what is archived and below the log start", || {
        segment_logs(&partition_dir).len() == 1
    })
    .await;
    broker.shutdown().await;
}

/// Whether a process is running: not gone and not a zombie (an orphan's
/// zombie waits for whoever reaps for the container).
fn running(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| stat.rsplit_once(") ").map(|(_, rest)| !rest.starts_with('Z')))
        .unwrap_or(false)
}

#[tokio::test]
async fn a_command_still_running_at_the_stop_is_killed_with_its_children() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let pids = scratch.path().join("pids");
    // The shell and a child of it, both waiting far longer than the test.
    let hanging = format!("sleep 300 & echo $$ $! > \"{}.tmp\" && mv \"{0}.tmp\" \"{0}\"; wait", pids.display());
    let broker = start(Some(hanging)).await;
    let mut client = broker.client().await;
    create_kept_topic(&mut client, "stuck").await;
    for i in 0..4 {
        let answer = produce(&mut client, 9, "stuck", 0, -1, batch(&records(&format!("r{i}"), 8))).await;
        assert_eq!(answer.error_code, 0);
    }
    eventually("the command started", || pids.exists()).await;
    let started: Vec<i32> =
        std::fs::read_to_string(&pids).expect("pids").split_whitespace().map(|p| p.parse().expect("a pid")).collect();
    assert_eq!(started.len(), 2, "{started:?}");
    assert!(started.iter().all(|p| running(*p)), "{started:?}");
    let (dir, _) = broker.shutdown().await;
    eventually("the command and its child are gone", || !started.iter().any(|p| running(*p))).await;
    // Killed, not finished: the segment counts as not archived (the next start archives it).
    assert!(!dir.path().join("stuck-0").join("archived-offset-checkpoint").exists());
}

/// The files a partition holds open, as /proc/self/fd shows them.
fn open_files_under(dir_name_part: &str) -> usize {
    std::fs::read_dir("/proc/self/fd")
        .map(|fds| {
            fds.filter_map(|e| e.ok())
                .filter_map(|e| std::fs::read_link(e.path()).ok())
                .filter(|target| target.to_string_lossy().contains(dir_name_part))
                .count()
        })
        .unwrap_or(0)
}

/// Deleting a topic lets go of its files, so its disk space comes back at
/// once: the archiving task, which wakes at every segment roll, must not keep
/// the partitions of its last pass while it waits (it did, with archiving
/// off, until the next roll anywhere).
#[tokio::test]
async fn a_deleted_topics_files_are_closed() {
    use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
    use kafka_protocol::messages::DeleteTopicsRequest;
    let broker = start(None).await;
    let mut client = broker.client().await;
    create_kept_topic(&mut client, "let-go").await;
    for i in 0..12 {
        let answer = produce(&mut client, 9, "let-go", 0, -1, batch(&records(&format!("r{i}"), 8))).await;
        assert_eq!(answer.error_code, 0);
    }
    assert!(segment_logs(&broker.dir.path().join("let-go-0")).len() >= 3, "segments rolled");
    assert!(open_files_under("let-go-0") > 0, "the partition's files are open while it exists");
    let delete = DeleteTopicsRequest::default()
        .with_topics(vec![DeleteTopicState::default().with_name(Some(name("let-go")))])
        .with_timeout_ms(10_000);
    assert_eq!(client.call(6, &delete).await.responses[0].error_code, 0);
    eventually("no file of the deleted topic is open", || open_files_under("let-go-0") == 0).await;
    broker.shutdown().await;
}

#[tokio::test]
async fn the_timeline_names_a_directory_of_its_own() {
    // %t: a primary promoted from a standby writes on a new timeline, so its
    // files (rolled where its own appends rolled) never land on the old one's.
    let archive = tempfile::tempdir().expect("tempdir");
    let command = format!("d=\"{}/%t/%f\"; mkdir -p \"${{d%/*}}\" && cp %p \"$d\"", archive.path().display());
    let dir = tempfile::tempdir().expect("tempdir");
    let config = BrokerConfig {
        segment_bytes_max: 1024,
        archive_command: Some(command),
        timeline: 7,
        ..BrokerConfig::for_tests(dir.path().to_path_buf())
    };
    let broker = TestBroker::start_with(dir, Arc::default(), config).await;
    let board = &broker.broker.context().config.metrics.archive;
    let mut client = broker.client().await;
    create_kept_topic(&mut client, "timelined").await;
    for i in 0..6 {
        let answer = produce(&mut client, 9, "timelined", 0, -1, batch(&records(&format!("r{i}"), 8))).await;
        assert_eq!(answer.error_code, 0);
    }
    let logs = segment_logs(&broker.dir.path().join("timelined-0"));
    assert!(logs.len() >= 2, "the segments rolled: {logs:?}");
    eventually("the first segment is archived", || board.status().segments_archived >= 1).await;
    assert!(archive.path().join("7/timelined-0").join(&logs[0]).is_file(), "archived under the timeline's directory");
    assert!(!archive.path().join("timelined-0").exists());
    broker.shutdown().await;
}
