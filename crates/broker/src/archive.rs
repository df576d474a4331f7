//! Topic data in backups: `kafgres.archive_command`, run for every closed
//! segment and its indexes, as PostgreSQL's `archive_command` is for WAL.
//!
//! One broker-wide task ([`run`]) archives, partition by partition, each
//! segment that is no longer the active one, oldest first: its `.log`, then
//! its `.index` and `.timeindex`, each with `%p` replaced by the file's
//! absolute path, `%f` by its path under the log directory
//! (`<partition directory>/<file>`) and `%t` by the PostgreSQL timeline the
//! primary writes its WAL on (a promotion starts a new one: a directory per
//! timeline keeps two primaries' files apart), run by `sh -c` in the log
//! directory; a
//! partition's first archived segment also carries its `partition.metadata`
//! (see `Partition::unarchived_segments`). A
//! segment counts as archived when the command succeeded for all three; the
//! partition records that in its `archived-offset-checkpoint` file (the base
//! offset of the next segment to archive). A failure is logged, counted and
//! retried after a backoff (1 s doubling to 60 s), the same segment first:
//! archiving never skips. Until a segment is archived, retention and
//! DeleteRecords leave its files in place (`Partition::archive_hold`), so a
//! failing command cannot let the log lose what the archive does not have.
//!
//! Each command runs in a process group of its own; at the broker's stop a
//! command still running is killed with its whole group ([`Archive::stop`])
//! rather than left behind, and its segment is archived again, from its
//! first file, at the next start (a command must tolerate a file it already
//! archived, as PostgreSQL asks of its own).
//!
//! Event-driven: the task sleeps until a segment rolls, the command changes
//! (a reload), or a retry is due. It runs commands on blocking threads and
//! never touches Postgres; the status it keeps is in shared
//! memory (`crate::metrics::ArchiveBoard`) for `kafgres.archive_status` and
//! the metrics endpoint.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use tokio::sync::Notify;

use crate::metrics::ArchiveBoard;
use crate::partition::Partition;

/// The first wait after a failed command; doubled after each failure.
const RETRY_FIRST: Duration = Duration::from_secs(1);
/// The longest wait between retries.
const RETRY_MAX: Duration = Duration::from_secs(60);

/// The archive command in force and the task's wake-up, shared by the
/// partitions (which hold their segments until archived) and the task.
#[derive(Debug, Default)]
pub struct Archive {
    command: Mutex<Option<String>>,
    wake: Notify,
    board: OnceLock<&'static ArchiveBoard>,
    /// The process group of the command running now, if one is.
    running: Mutex<Option<u32>>,
    /// Set at the broker's stop: no command starts after it.
    stopped: AtomicBool,
    /// The timeline this primary writes its WAL on, for `%t`.
    timeline: AtomicU32,
}

impl Archive {
    /// The command changed (start, reload): archiving starts, stops or goes
    /// on with the new one from the next file.
    pub fn set_command(&self, command: Option<String>) {
        let command = command.filter(|c| !c.trim().is_empty());
        let mut current = self.command.lock().unwrap_or_else(|p| p.into_inner());
        if *current != command {
            *current = command;
            self.wake.notify_one();
        }
    }

    /// The broker stops: no command starts any more, and the one running,
    /// if any, is killed with its process group (SIGKILL: a command that
    /// hangs must not outlive the broker). Returns its process group id.
    pub fn stop(&self) -> Option<u32> {
        self.stopped.store(true, Ordering::Release);
        self.wake.notify_one();
        let running = *self.running.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(group) = running {
            kill_group(group);
            log::warn!(
                "killed kafgres.archive_command (process group {group}), still running at the stop; its segment is \
                 archived again at the next start"
            );
        }
        running
    }

    fn stopped(&self) -> bool {
        self.stopped.load(Ordering::Acquire)
    }

    /// Runs one expanded command in `dir`, in a process group of its own,
    /// on the calling (blocking) thread.
    fn run_command(&self, shell: &str, dir: &Path) -> std::io::Result<std::process::Output> {
        use std::os::unix::process::CommandExt;
        let child = std::process::Command::new("sh")
            .arg("-c")
            .arg(shell)
            .current_dir(dir)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .process_group(0)
            .spawn()?;
        *self.running.lock().unwrap_or_else(|p| p.into_inner()) = Some(child.id());
        // A stop between the spawn and the line above found nothing to kill.
        if self.stopped() {
            kill_group(child.id());
        }
        let output = child.wait_with_output();
        *self.running.lock().unwrap_or_else(|p| p.into_inner()) = None;
        output
    }

    /// The timeline this primary writes its WAL on (set when it starts
    /// leading; a promotion starts a new broker on a new timeline).
    pub fn set_timeline(&self, timeline: u32) {
        self.timeline.store(timeline, Ordering::Relaxed);
    }

    pub fn timeline(&self) -> u32 {
        self.timeline.load(Ordering::Relaxed)
    }

    pub fn command(&self) -> Option<String> {
        self.command.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Whether segments must be archived before they may be deleted.
    pub fn enabled(&self) -> bool {
        self.command.lock().unwrap_or_else(|p| p.into_inner()).is_some()
    }

    /// A segment rolled: there may be one more to archive.
    pub fn wake(&self) {
        self.wake.notify_one();
    }

    /// Where the status is published (the broker's shared metrics).
    pub fn attach_board(&self, board: &'static ArchiveBoard) {
        let _ = self.board.set(board);
    }

    fn board(&self) -> Option<&'static ArchiveBoard> {
        self.board.get().copied()
    }
}

/// `command` with `%p`, `%f` and `%%` replaced, as PostgreSQL's
/// `archive_command` is, and `%t` by the timeline.
pub fn expand(command: &str, path: &Path, relative: &str, timeline: u32) -> String {
    let mut out = String::with_capacity(command.len() + 64);
    let mut chars = command.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.peek() {
            Some('p') => {
                out.push_str(&path.display().to_string());
                chars.next();
            }
            Some('f') => {
                out.push_str(relative);
                chars.next();
            }
            Some('t') => {
                out.push_str(&timeline.to_string());
                chars.next();
            }
            Some('%') => {
                out.push('%');
                chars.next();
            }
            _ => out.push('%'),
        }
    }
    out
}

/// The broker-wide archiving task: until `partitions` returns `None` (the
/// broker stopped).
pub async fn run(archive: Arc<Archive>, log_dir: PathBuf, partitions: impl Fn() -> Option<Vec<Arc<Partition>>>) {
    let mut retry = RETRY_FIRST;
    loop {
        if archive.stopped() {
            return;
        }
        let Some(mut all) = partitions() else { return };
        let outcome = match archive.command() {
            None => Outcome::Idle,
            Some(command) => {
                all.sort_by(|a, b| (&a.topic, a.index).cmp(&(&b.topic, b.index)));
                archive_all(&archive, &command, &log_dir, &all).await
            }
        };
        if let Some(board) = archive.board() {
            let backlog: usize =
                if archive.enabled() { all.iter().map(|p| p.unarchived_segments().len()).sum() } else { 0 };
            board.set_backlog(backlog as u64);
        }
        // Not held across the wait: a deleted topic's partitions (and their
        // open files, so their disk space) must go when the topic does.
        drop(all);
        match outcome {
            Outcome::Idle => {
                retry = RETRY_FIRST;
                archive.wake.notified().await;
            }
            Outcome::Failed => {
                tokio::select! {
                    _ = tokio::time::sleep(retry) => {}
                    _ = archive.wake.notified() => {}
                }
                retry = (retry * 2).min(RETRY_MAX);
            }
        }
    }
}

enum Outcome {
    /// Everything closed is archived (or archiving is off).
    Idle,
    /// A command failed: retry after the backoff.
    Failed,
}

async fn archive_all(archive: &Arc<Archive>, command: &str, log_dir: &Path, partitions: &[Arc<Partition>]) -> Outcome {
    for partition in partitions {
        for segment in partition.unarchived_segments() {
            // The command may have changed (or been turned off) meanwhile.
            if archive.stopped() || archive.command().as_deref() != Some(command) {
                return Outcome::Idle;
            }
            for file in &segment.files {
                let relative = match file.strip_prefix(log_dir) {
                    Ok(r) => r.display().to_string(),
                    Err(_) => file.display().to_string(),
                };
                let shell = expand(command, file, &relative, archive.timeline());
                // std's process on a blocking thread: it waits for its own
                // child only, where tokio's would install a SIGCHLD handler
                // in the host's process.
                let dir = log_dir.to_path_buf();
                let runner = Arc::clone(archive);
                let ran = tokio::task::spawn_blocking(move || runner.run_command(&shell, &dir)).await;
                if archive.stopped() {
                    return Outcome::Idle;
                }
                let failure = match ran {
                    Ok(Ok(out)) if out.status.success() => None,
                    Ok(Ok(out)) => Some(format!(
                        "{} ({})",
                        out.status,
                        String::from_utf8_lossy(&out.stderr).trim().chars().take(200).collect::<String>()
                    )),
                    Ok(Err(e)) => Some(format!("cannot run sh: {e}")),
                    Err(e) => Some(format!("the archiving thread failed: {e}")),
                };
                if let Some(reason) = failure {
                    log::warn!("kafgres.archive_command failed for {relative}: {reason}; retrying");
                    if let Some(board) = archive.board() {
                        board.record_failure(crate::now_ms(), &format!("{relative}: {reason}"));
                    }
                    return Outcome::Failed;
                }
                if let Some(board) = archive.board() {
                    let bytes = std::fs::metadata(file).map_or(0, |m| m.len());
                    board.record_file(crate::now_ms(), &relative, bytes);
                }
            }
            if let Err(e) = partition.mark_archived(segment.next_base_offset) {
                log::warn!("cannot record the archiving of {}-{}: {e}; retrying", partition.topic, partition.index);
                return Outcome::Failed;
            }
            if let Some(board) = archive.board() {
                board.record_segment();
            }
            // Retention may delete it now.
            partition.wake_housekeeping();
        }
    }
    Outcome::Idle
}

/// SIGKILL to a process group.
fn kill_group(group: u32) {
    let Ok(group) = libc::pid_t::try_from(group) else { return };
    // SAFETY: kill(2) with a negative pid signals that process group; it
    // touches no memory of ours.
    unsafe {
        libc::kill(-group, libc::SIGKILL);
    }
}

/// A closed segment's files, in the order they are archived.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClosedSegment {
    pub base_offset: i64,
    /// The next segment's base offset: what the checkpoint says once this one is archived.
    pub next_base_offset: i64,
    pub files: Vec<PathBuf>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percent_escapes_expand_as_postgres_expands_them() {
        let path = Path::new("/data/kafgres/orders-0/00000000000000000000.log");
        let cmd = "test ! -f /arch/%t/%f && cp %p /arch/%t/%f && echo 100%% %x";
        assert_eq!(
            expand(cmd, path, "orders-0/00000000000000000000.log", 3),
            "test ! -f /arch/3/orders-0/00000000000000000000.log && cp /data/kafgres/orders-0/00000000000000000000.log \
             /arch/3/orders-0/00000000000000000000.log && echo 100% %x"
        );
    }

    #[test]
    fn a_blank_command_turns_archiving_off() {
        let archive = Archive::default();
        archive.set_command(Some("cp %p /x/%f".into()));
        assert!(archive.enabled());
        archive.set_command(Some("  ".into()));
        assert!(!archive.enabled());
    }
}
