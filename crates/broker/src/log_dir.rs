//! The log directory as a whole, checked once at startup before anything is
//! served: which database it belongs to, and which of its partition
//! directories no topic of that database claims.
//!
//! - **Owner** (`kafgres.owner`): the PostgreSQL system identifier and
//!   database OID whose catalog names the topics stored here, written the
//!   first time a broker starts on the directory. A broker serving another
//!   database (a changed `kafgres.database`, a restored or copied cluster)
//!   refuses to start, as Kafka refuses a log directory formatted for another
//!   cluster: otherwise that database's topics would claim same-named
//!   directories of this one and set their records aside for deletion.
//! - **Strays**: a `<topic>-<partition>` directory that no topic of the
//!   catalog owns (the catalog forgot it: `DROP EXTENSION` and `CREATE
//!   EXTENSION` again, or a crash between a topic's catalog delete and its
//!   directories' rename). Its records are unreachable, so it is renamed
//!   aside and removed, as Kafka deletes stray replicas at startup; without
//!   this its disk space would never come back.
//!
//! It owns these two decisions and the naming and removal of directories set
//! aside ([`deleted_dir_name`], [`remove_deleted_dirs`]); partition
//! directories themselves are opened by [`crate::topics`].

use std::collections::HashSet;
use std::fmt;
use std::path::{Path, PathBuf};

use kafgres_log::storage::{replace_file_atomically, FileStorage};
use kafgres_log::LogError;
use uuid::Uuid;

/// Name of the owner file in the log directory.
pub const OWNER_FILE: &str = "kafgres.owner";

/// The database whose catalog a log directory's topics belong to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogDirOwner {
    /// `pg_control_system().system_identifier`: different for every initdb.
    pub system_identifier: u64,
    pub database_oid: u32,
    /// For messages only: a database may be renamed and stay the owner.
    /// Stored escaped (`escape_debug`), so that any name is one line.
    pub database: String,
}

impl LogDirOwner {
    /// The owner every test broker claims.
    pub fn for_tests() -> LogDirOwner {
        LogDirOwner { system_identifier: 0, database_oid: 0, database: "tests".into() }
    }

    fn same_database(&self, other: &LogDirOwner) -> bool {
        self.system_identifier == other.system_identifier && self.database_oid == other.database_oid
    }

    fn file_text(&self) -> String {
        format!(
            "version: 1\nsystem_identifier: {}\ndatabase_oid: {}\ndatabase: {}\n",
            self.system_identifier,
            self.database_oid,
            self.stored_name()
        )
    }

    /// The name as the owner file holds it: one line whatever the name.
    fn stored_name(&self) -> String {
        self.database.escape_debug().to_string()
    }

    fn parse(text: &str) -> Option<LogDirOwner> {
        let mut fields = std::collections::HashMap::new();
        for line in text.lines() {
            let (key, value) = line.split_once(": ")?;
            fields.insert(key, value);
        }
        if fields.get("version") != Some(&"1") {
            return None;
        }
        Some(LogDirOwner {
            system_identifier: fields.get("system_identifier")?.parse().ok()?,
            database_oid: fields.get("database_oid")?.parse().ok()?,
            database: fields.get("database")?.to_string(),
        })
    }
}

impl fmt::Display for LogDirOwner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "database \"{}\" (OID {}) of the PostgreSQL cluster with system identifier {}",
            self.database, self.database_oid, self.system_identifier
        )
    }
}

#[derive(Debug, thiserror::Error)]
pub enum LogDirError {
    #[error(
        "log directory {dir} holds the topics of {found}, not of {expected}; \
         hint: point kafgres.log_dir at another directory, or, if those topics are no longer wanted, \
         remove {dir}/{OWNER_FILE} (the broker then removes every partition directory its own catalog does not name)"
    )]
    OtherOwner { dir: PathBuf, found: LogDirOwner, expected: LogDirOwner },
    #[error(
        "cannot tell which database log directory {dir} belongs to: {OWNER_FILE} is unreadable ({reason}); \
         hint: if it belongs to {expected}, remove the file and the broker writes it again"
    )]
    Unreadable { dir: PathBuf, reason: String, expected: LogDirOwner },
    #[error("cannot record the owner of log directory {dir}: {source}")]
    Io { dir: PathBuf, source: LogError },
}

/// Checks that `dir` belongs to `owner`'s database, recording it when the
/// directory has no owner yet (a new directory, or one written before owner
/// files existed). A renamed database stays the owner; the file is updated.
pub fn claim_owner(dir: &Path, owner: &LogDirOwner) -> Result<(), LogDirError> {
    let path = dir.join(OWNER_FILE);
    match std::fs::read_to_string(&path) {
        Ok(text) => match LogDirOwner::parse(&text) {
            // `found` was read back from the file: its name is the stored form.
            Some(found) if found.same_database(owner) && found.database == owner.stored_name() => return Ok(()),
            Some(found) if found.same_database(owner) => {}
            Some(found) => {
                return Err(LogDirError::OtherOwner { dir: dir.to_path_buf(), found, expected: owner.clone() });
            }
            None => {
                return Err(LogDirError::Unreadable {
                    dir: dir.to_path_buf(),
                    reason: "not an owner file of this version".into(),
                    expected: owner.clone(),
                });
            }
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => {
            return Err(LogDirError::Unreadable {
                dir: dir.to_path_buf(),
                reason: e.to_string(),
                expected: owner.clone(),
            })
        }
    }
    replace_file_atomically(&FileStorage, &path, owner.file_text().as_bytes())
        .map_err(|source| LogDirError::Io { dir: dir.to_path_buf(), source })
}

/// Renames aside (for [`remove_deleted_dirs`]) every partition
/// directory of `dir` whose name is not in `claimed`, and returns the new
/// paths. Only `<name>-<partition number>` directories are touched: files
/// and other directories (an operator's notes, the SQL applier's checkpoint)
/// stay. Failures are logged; a stray that stays is retried at the next start.
pub fn set_strays_aside(dir: &Path, claimed: &HashSet<String>) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut aside = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !entry.file_type().is_ok_and(|t| t.is_dir())
            || name.ends_with(DELETED_DIR_SUFFIX)
            || !is_partition_dir_name(&name)
            || claimed.contains(&name)
        {
            continue;
        }
        let path = entry.path();
        let target = deleted_dir_name(&path, "stray");
        match std::fs::rename(&path, &target) {
            Ok(()) => {
                log::warn!(
                    "{} belongs to no topic of the catalog (a dropped extension's, or a deletion a crash \
                     interrupted); removing it",
                    path.display()
                );
                aside.push(target);
            }
            Err(e) => log::warn!("cannot set aside stray partition directory {}: {e}", path.display()),
        }
    }
    if !aside.is_empty() {
        if let Err(e) = kafgres_log::partition::sync_dir(dir) {
            log::warn!("{e}");
        }
    }
    aside
}

/// `<topic>-<partition>` with a non-empty topic and a partition number.
fn is_partition_dir_name(name: &str) -> bool {
    name.rsplit_once('-').is_some_and(|(topic, index)| {
        !topic.is_empty() && !index.is_empty() && index.parse::<i32>().is_ok_and(|i| i >= 0)
    })
}

/// Suffix of partition directories waiting to be removed.
pub const DELETED_DIR_SUFFIX: &str = "-delete";

/// `<dir>.<tag>-<random>-delete`: unique, and recognised at startup. The
/// directory's own name is cut so the whole fits the partition directories'
/// limit (as Kafka cuts the topic in its `-delete` names), so that a base
/// backup taken meanwhile can carry it.
pub fn deleted_dir_name(dir: &Path, tag: &str) -> PathBuf {
    use crate::topics::{prefix_of, DIR_NAME_BYTES_MAX};
    let name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    // 64 random bits: unique enough among one directory's deletions, and short.
    let random = Uuid::new_v4().as_u64_pair().0;
    let suffix = format!(".{tag}-{random:016x}{DELETED_DIR_SUFFIX}");
    let keep = DIR_NAME_BYTES_MAX.saturating_sub(suffix.len());
    dir.with_file_name(format!("{}{suffix}", prefix_of(&name, keep)))
}

/// Removes partition directories set aside for deletion (after DeleteTopics,
/// or stale ones found at open). Runs in the background at startup; errors are logged.
pub fn remove_deleted_dirs(log_dir: &Path) {
    let Ok(entries) = std::fs::read_dir(log_dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.ends_with(DELETED_DIR_SUFFIX)) {
            match std::fs::remove_dir_all(&path) {
                Ok(()) => log::info!("removed deleted partition directory {}", path.display()),
                // Removed meanwhile (by the deletion that set it aside, still running).
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => log::warn!("cannot remove {}: {e}", path.display()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner(oid: u32, name: &str) -> LogDirOwner {
        LogDirOwner { system_identifier: 7_443_001, database_oid: oid, database: name.into() }
    }

    #[test]
    fn an_owner_is_recorded_then_required() {
        let dir = tempfile::tempdir().expect("tempdir");
        claim_owner(dir.path(), &owner(5, "postgres")).expect("first claim records");
        claim_owner(dir.path(), &owner(5, "postgres")).expect("same owner");
        let err = claim_owner(dir.path(), &owner(16_384, "app")).expect_err("another database");
        let text = err.to_string();
        assert!(text.contains("\"postgres\" (OID 5)") && text.contains("\"app\" (OID 16384)"), "{text}");
        assert!(text.contains("hint:"), "{text}");
        let other_cluster = LogDirOwner { system_identifier: 9, ..owner(5, "postgres") };
        assert!(matches!(claim_owner(dir.path(), &other_cluster), Err(LogDirError::OtherOwner { .. })));
    }

    #[test]
    fn a_renamed_database_stays_the_owner() {
        let dir = tempfile::tempdir().expect("tempdir");
        claim_owner(dir.path(), &owner(5, "postgres")).expect("claim");
        claim_owner(dir.path(), &owner(5, "renamed")).expect("same OID, new name");
        let text = std::fs::read_to_string(dir.path().join(OWNER_FILE)).expect("owner file");
        assert!(text.contains("database: renamed"), "{text}");
    }

    #[test]
    fn any_database_name_is_kept_on_one_line() {
        let dir = tempfile::tempdir().expect("tempdir");
        let odd = owner(5, "two\nlines: \"quoted\"");
        claim_owner(dir.path(), &odd).expect("claim");
        let text = std::fs::read_to_string(dir.path().join(OWNER_FILE)).expect("owner file");
        assert_eq!(text.lines().count(), 4, "{text}");
        let inode = || {
            use std::os::unix::fs::MetadataExt;
            std::fs::metadata(dir.path().join(OWNER_FILE)).expect("owner file").ino()
        };
        let before = inode();
        claim_owner(dir.path(), &odd).expect("the same owner again");
        assert_eq!(inode(), before, "an unchanged owner is not rewritten (a rewrite renames a new file in)");
        assert!(matches!(claim_owner(dir.path(), &owner(6, "two")), Err(LogDirError::OtherOwner { .. })));
    }

    #[test]
    fn an_unreadable_owner_file_refuses_rather_than_guesses() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join(OWNER_FILE), "version: 7\n").expect("write");
        assert!(matches!(claim_owner(dir.path(), &owner(5, "postgres")), Err(LogDirError::Unreadable { .. })));
    }

    #[test]
    fn only_unclaimed_partition_directories_are_strays() {
        let dir = tempfile::tempdir().expect("tempdir");
        for name in ["kept-0", "gone-0", "gone-12", "notes", "x-y", "-3", "old-0.deleted-1-delete"] {
            std::fs::create_dir(dir.path().join(name)).expect("mkdir");
        }
        std::fs::write(dir.path().join("file-1"), b"a file").expect("file");
        let claimed: HashSet<String> = ["kept-0".to_string()].into();
        let aside = set_strays_aside(dir.path(), &claimed);
        assert_eq!(aside.len(), 2, "{aside:?}");
        let mut left: Vec<String> = std::fs::read_dir(dir.path())
            .expect("dir")
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        left.retain(|n| !n.contains(".stray-"));
        left.sort();
        assert_eq!(left, ["-3", "file-1", "kept-0", "notes", "old-0.deleted-1-delete", "x-y"]);
        assert!(aside.iter().all(|p| p.to_string_lossy().ends_with(DELETED_DIR_SUFFIX)));
    }
}
