//! The in-memory registry of topics and their open partitions.
//!
//! Built at startup from the catalog's topic records; a topic enters it only
//! after the catalog has stored it durably ([`crate::topic_admin`] makes every
//! change). The registry lock is never held across an `.await` or any I/O.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use kafgres_log::{replace_file_atomically, FileStorage, LogConfig, LogError, PartitionLog};
use uuid::Uuid;

use crate::catalog::TopicRecord;
use crate::config::BrokerConfig;
use crate::log_dir::deleted_dir_name;
use crate::partition::{Housekeeping, Partition};

/// Kafka's limit on topic name length.
pub const TOPIC_NAME_CHARS_MAX: usize = 249;

pub struct Topic {
    pub id: Uuid,
    pub name: String,
    pub partitions: Vec<Arc<Partition>>,
    pub configs: BTreeMap<String, String>,
}

impl Topic {
    /// Opens (recovering if needed) every partition log of a catalog topic.
    pub fn open(
        record: &TopicRecord,
        config: &BrokerConfig,
        housekeeping: &Housekeeping,
        now_ms: i64,
    ) -> Result<Topic, LogError> {
        let partitions = open_partitions(record, 0, config, housekeeping, now_ms)?;
        Ok(Topic { id: record.topic_id, name: record.name.clone(), partitions, configs: record.configs.clone() })
    }

    /// This topic with its partition count raised to `partition_count`: the
    /// existing partitions are shared, the new ones opened.
    pub fn with_partitions(
        &self,
        partition_count: i32,
        config: &BrokerConfig,
        housekeeping: &Housekeeping,
        now_ms: i64,
    ) -> Result<Topic, LogError> {
        let record =
            TopicRecord { topic_id: self.id, name: self.name.clone(), partition_count, configs: self.configs.clone() };
        let mut partitions = self.partitions.clone();
        partitions.extend(open_partitions(&record, self.partitions.len() as i32, config, housekeeping, now_ms)?);
        Ok(Topic { id: self.id, name: self.name.clone(), partitions, configs: self.configs.clone() })
    }

    /// This topic with new config overrides (AlterConfigs): the partitions are
    /// shared and told the settings they act on.
    pub fn with_configs(&self, configs: BTreeMap<String, String>, config: &BrokerConfig) -> Topic {
        let altered = Topic { id: self.id, name: self.name.clone(), partitions: self.partitions.clone(), configs };
        altered.reconfigure_partitions(config);
        altered
    }

    /// Tells every partition the settings it acts on: the topic's overrides
    /// over the dynamic broker defaults in force (after either changed).
    pub fn reconfigure_partitions(&self, config: &BrokerConfig) {
        let dynamic = config.live.dynamic();
        let configs = dynamic.effective_topic_configs(&self.configs);
        let log_config = log_config(&configs, config);
        for p in &self.partitions {
            p.reconfigure(&configs, log_config);
        }
    }

    pub fn partition(&self, index: i32) -> Option<&Arc<Partition>> {
        usize::try_from(index).ok().and_then(|i| self.partitions.get(i))
    }
}

fn open_partitions(
    record: &TopicRecord,
    first: i32,
    config: &BrokerConfig,
    housekeeping: &Housekeeping,
    now_ms: i64,
) -> Result<Vec<Arc<Partition>>, LogError> {
    // The overrides over the dynamic broker defaults (`log.retention.ms`...).
    let dynamic = config.live.dynamic();
    let configs = dynamic.effective_topic_configs(&record.configs);
    let log_config = log_config(&configs, config);
    let mut partitions = Vec::with_capacity((record.partition_count - first).max(0) as usize);
    for index in first..record.partition_count {
        let dir = partition_dir(&config.log_dir, &record.name, index);
        adopt_legacy_dir(&config.log_dir, &dir, &record.name, index)?;
        claim_partition_dir(&config.log_dir, &dir, record.topic_id)?;
        let (log, reports) = PartitionLog::open(&dir, log_config, now_ms)?;
        for r in reports.segments.iter().filter(|r| r.truncated_bytes > 0) {
            log::warn!(
                "recovered {}-{index}: cut {} bytes ({})",
                record.name,
                r.truncated_bytes,
                r.truncation_reason.as_deref().unwrap_or("?")
            );
        }
        partitions.push(Partition::start(
            record.name.clone(),
            index,
            log,
            housekeeping,
            &configs,
            crate::partition::PartitionSettings::from(config),
        ));
    }
    Ok(partitions)
}

/// The log settings a topic's configs give its partitions: its
/// `segment.bytes` (or a dynamic `log.segment.bytes`, already in `configs`),
/// else the broker's `kafgres.segment_bytes`.
pub fn log_config(configs: &BTreeMap<String, String>, config: &BrokerConfig) -> LogConfig {
    let segment_bytes_max = configs
        .get("segment.bytes")
        .and_then(|v| v.trim().parse::<u64>().ok())
        .filter(|b| *b > 0)
        .unwrap_or(config.segment_bytes_max);
    LogConfig { segment_bytes_max, reserve_ahead_bytes: config.segment_reserve_ahead_bytes, ..LogConfig::default() }
}

/// The file in each partition directory naming the topic id it belongs to.
pub const PARTITION_METADATA_FILE: &str = "partition.metadata";

/// Makes sure `dir` holds data of topic `topic_id`. A directory left by an
/// earlier topic of the same name (deleted, then a crash before its
/// directories were renamed) is set aside for deletion so the new topic starts
/// empty instead of serving the old topic's records.
fn claim_partition_dir(log_dir: &Path, dir: &Path, topic_id: Uuid) -> Result<(), LogError> {
    let metadata = dir.join(PARTITION_METADATA_FILE);
    let expected = format!("version: 0\ntopic_id: {topic_id}\n");
    match std::fs::read_to_string(&metadata) {
        Ok(found) if found == expected => return Ok(()),
        Ok(found) => {
            let aside = deleted_dir_name(dir, "stale");
            log::warn!(
                "{} belongs to another topic ({:?}); moving it to {} for deletion",
                dir.display(),
                found.lines().nth(1).unwrap_or(""),
                aside.display()
            );
            std::fs::rename(dir, &aside).map_err(io_error(dir))?;
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(LogError::Io { path: metadata, source: e }),
    }
    std::fs::create_dir_all(dir).map_err(io_error(dir))?;
    // Fsyncs `dir` too; its own entry in the log directory needs the second fsync.
    replace_file_atomically(&FileStorage, &metadata, expected.as_bytes())?;
    kafgres_log::partition::sync_dir(log_dir)
}

/// The longest partition directory name. Far below NAME_MAX (255), because
/// `pg_basebackup` (the way a standby is made) sends the data directory as
/// tar, whose paths are at most 99 bytes: `kafgres/` (8) + the directory +
/// `/` + the longest file name in it (40: `<20 digits>.timeindex.cleaned`,
/// `recovery-point-offset-checkpoint.tmp`) leaves 50.
pub const DIR_NAME_BYTES_MAX: usize = 50;

/// Release 0.1.0 named every partition directory `<topic>-<partition>`: one
/// too long for [`DIR_NAME_BYTES_MAX`] is renamed to its current name (once;
/// the rename is atomic and the log directory fsync'd), so an upgrade keeps
/// the topic's data.
fn adopt_legacy_dir(log_dir: &Path, dir: &Path, topic: &str, index: i32) -> Result<(), LogError> {
    let legacy = log_dir.join(format!("{topic}-{index}"));
    if legacy == dir || dir.exists() || !legacy.is_dir() {
        return Ok(());
    }
    std::fs::rename(&legacy, dir).map_err(io_error(&legacy))?;
    log::info!("renamed partition directory {} to {} (names now fit pg_basebackup)", legacy.display(), dir.display());
    kafgres_log::partition::sync_dir(log_dir)
}

/// The longest prefix of `name` of at most `bytes` bytes, cut at a character boundary.
pub fn prefix_of(name: &str, bytes: usize) -> &str {
    let mut end = name.len().min(bytes);
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    &name[..end]
}

/// Where a partition's segments live: `<log_dir>/<topic>-<partition>`, as in Kafka.
pub fn partition_dir(log_dir: &Path, topic: &str, index: i32) -> PathBuf {
    log_dir.join(partition_dir_name(topic, index))
}

/// `<topic>-<partition>`, as Kafka names it, when that fits
/// [`DIR_NAME_BYTES_MAX`]; a longer one (topics may have 249 characters)
/// becomes `<topic prefix>~<hash of the topic>-<partition>`. `~` is not a
/// legal topic character, so no other topic's directory has that name, and
/// the same topic always gets the same one.
fn partition_dir_name(topic: &str, index: impl std::fmt::Display) -> String {
    let name = format!("{topic}-{index}");
    if name.len() <= DIR_NAME_BYTES_MAX {
        return name;
    }
    let index = index.to_string();
    let hash = format!("{:016x}", fnv1a_64(topic.as_bytes()));
    let keep = DIR_NAME_BYTES_MAX - (1 + hash.len() + 1 + index.len());
    format!("{}~{hash}-{index}", prefix_of(topic, keep))
}

/// FNV-1a, 64 bits: a stable hash (the directory name must not change
/// between releases or restarts, which rules out std's randomised hasher).
fn fnv1a_64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3))
}

/// The topics every handler reads: the registry behind its lock. Reads clone
/// an `Arc` out and release the lock at once; only [`crate::topic_admin`]
/// writes.
#[derive(Default)]
pub struct Topics {
    registry: RwLock<TopicRegistry>,
    /// The broker is shutting down: long polls answer at once.
    draining: std::sync::atomic::AtomicBool,
    /// Moves at every change of the set of topics, their partitions or
    /// configs: a follower fetches it (docs/replication.md) and re-reads the
    /// leader's metadata when it moved.
    catalog_version: std::sync::atomic::AtomicI64,
    /// Follower fetches waiting for the catalog version to move.
    catalog_waiters: std::sync::Mutex<Vec<Arc<crate::partition::FetchWaiter>>>,
}

impl Topics {
    pub fn new(registry: TopicRegistry) -> Topics {
        Topics { registry: RwLock::new(registry), ..Topics::default() }
    }

    pub fn catalog_version(&self) -> i64 {
        self.catalog_version.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Registers a follower's fetch, woken at the next catalog change.
    pub fn register_catalog_waiter(&self, waiter: &Arc<crate::partition::FetchWaiter>) {
        let mut waiters = self.catalog_waiters.lock().unwrap_or_else(|p| p.into_inner());
        waiters.retain(|w| !w.is_finished());
        waiters.push(Arc::clone(waiter));
    }

    fn catalog_changed(&self) {
        self.catalog_version.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        let mut waiters = self.catalog_waiters.lock().unwrap_or_else(|p| p.into_inner());
        waiters.retain(|w| !w.is_finished());
        for w in waiters.iter() {
            w.wake_now();
        }
    }

    /// A shutdown began: every long-polling fetch is woken and answers with
    /// what it has instead of waiting out its `max_wait_ms`.
    pub fn begin_draining(&self) {
        self.draining.store(true, std::sync::atomic::Ordering::Release);
        for p in self.all_partitions() {
            p.wake_fetch_waiters();
        }
    }

    pub fn draining(&self) -> bool {
        self.draining.load(std::sync::atomic::Ordering::Acquire)
    }

    pub fn get(&self, name: &str) -> Option<Arc<Topic>> {
        self.read().get(name)
    }

    pub fn get_by_id(&self, id: &Uuid) -> Option<Arc<Topic>> {
        self.read().get_by_id(id)
    }

    /// A topic of the catalog whose log could not be opened.
    pub fn offline(&self, name: &str) -> Option<Arc<OfflineTopic>> {
        self.read().offline(name)
    }

    pub fn offline_by_id(&self, id: &Uuid) -> Option<Arc<OfflineTopic>> {
        self.read().offline_by_id(id)
    }

    /// The error a data request for a partition of a missing topic gets:
    /// KAFKA_STORAGE_ERROR (retriable: the topic is there, its disk is not)
    /// for an offline topic, else `missing`.
    pub fn missing_code(&self, name: &str, missing: i16) -> i16 {
        if self.offline(name).is_some() {
            kafgres_wire::error_code::KAFKA_STORAGE_ERROR
        } else {
            missing
        }
    }

    /// One partition of a topic, if both exist.
    pub fn partition(&self, topic: &str, index: i32) -> Option<Arc<Partition>> {
        self.get(topic).and_then(|t| t.partition(index).cloned())
    }

    /// All topics, sorted by name.
    pub fn all(&self) -> Vec<Arc<Topic>> {
        self.read().all()
    }

    /// Every partition of every topic (the housekeeping tasks' rounds).
    pub fn all_partitions(&self) -> Vec<Arc<Partition>> {
        self.all().iter().flat_map(|t| t.partitions.iter().cloned()).collect()
    }

    /// The registry itself, for a reader that needs one view across several
    /// lookups (the group coordinator's [`crate::group::TopicLookup`]).
    pub fn read(&self) -> RwLockReadGuard<'_, TopicRegistry> {
        // A panic under the lock cannot leave the maps half-updated: each
        // change is one insert or remove.
        self.registry.read().unwrap_or_else(|p| p.into_inner())
    }

    /// The registry for a change; the catalog version moves when the change
    /// is done (the guard is dropped), and followers are woken.
    pub(crate) fn write(&self) -> TopicsChange<'_> {
        TopicsChange { topics: self, guard: Some(self.registry.write().unwrap_or_else(|p| p.into_inner())) }
    }
}

/// A change to the registry in progress (see [`Topics::write`]).
pub(crate) struct TopicsChange<'a> {
    topics: &'a Topics,
    guard: Option<RwLockWriteGuard<'a, TopicRegistry>>,
}

impl std::ops::Deref for TopicsChange<'_> {
    type Target = TopicRegistry;
    fn deref(&self) -> &TopicRegistry {
        self.guard.as_ref().expect("held until dropped")
    }
}

impl std::ops::DerefMut for TopicsChange<'_> {
    fn deref_mut(&mut self) -> &mut TopicRegistry {
        self.guard.as_mut().expect("held until dropped")
    }
}

impl Drop for TopicsChange<'_> {
    fn drop(&mut self) {
        // Released first: a woken follower fetch reads the registry.
        drop(self.guard.take());
        self.topics.catalog_changed();
    }
}

#[derive(Default)]
pub struct TopicRegistry {
    by_name: HashMap<String, Arc<Topic>>,
    by_id: HashMap<Uuid, Arc<Topic>>,
    /// Topics of the catalog whose logs could not be opened: the rest of the
    /// broker serves on; their clients get KAFKA_STORAGE_ERROR.
    offline: HashMap<String, Arc<OfflineTopic>>,
}

/// A topic of the catalog whose log could not be opened, and why.
#[derive(Debug, Clone)]
pub struct OfflineTopic {
    pub record: TopicRecord,
    pub reason: String,
}

impl TopicRegistry {
    /// Records a topic that could not be opened (it keeps its name and its
    /// directories; nothing else may take them).
    pub fn insert_offline(&mut self, record: TopicRecord, reason: String) {
        self.offline.insert(record.name.clone(), Arc::new(OfflineTopic { record, reason }));
    }

    pub fn offline(&self, name: &str) -> Option<Arc<OfflineTopic>> {
        self.offline.get(name).cloned()
    }

    pub fn offline_by_id(&self, id: &Uuid) -> Option<Arc<OfflineTopic>> {
        self.offline.values().find(|t| t.record.topic_id == *id).cloned()
    }

    pub fn remove_offline(&mut self, name: &str) -> Option<Arc<OfflineTopic>> {
        self.offline.remove(name)
    }

    /// Offline topics, sorted by name.
    pub fn all_offline(&self) -> Vec<Arc<OfflineTopic>> {
        let mut topics: Vec<_> = self.offline.values().cloned().collect();
        topics.sort_by(|a, b| a.record.name.cmp(&b.record.name));
        topics
    }

    pub fn insert(&mut self, topic: Topic) -> Arc<Topic> {
        let topic = Arc::new(topic);
        self.by_name.insert(topic.name.clone(), Arc::clone(&topic));
        self.by_id.insert(topic.id, Arc::clone(&topic));
        topic
    }

    /// Replaces a topic (same id) by a new version of it, e.g. with more partitions.
    pub fn replace(&mut self, topic: Topic) -> Arc<Topic> {
        self.insert(topic)
    }

    pub fn remove(&mut self, name: &str) -> Option<Arc<Topic>> {
        let topic = self.by_name.remove(name)?;
        self.by_id.remove(&topic.id);
        Some(topic)
    }

    pub fn get(&self, name: &str) -> Option<Arc<Topic>> {
        self.by_name.get(name).cloned()
    }

    pub fn get_by_id(&self, id: &Uuid) -> Option<Arc<Topic>> {
        self.by_id.get(id).cloned()
    }

    /// All topics, sorted by name (Metadata answers in a stable order).
    pub fn all(&self) -> Vec<Arc<Topic>> {
        let mut topics: Vec<_> = self.by_name.values().cloned().collect();
        topics.sort_by(|a, b| a.name.cmp(&b.name));
        topics
    }

    /// The directory names (`<topic>-<partition>`) of every registered partition.
    pub fn partition_dir_names(&self) -> std::collections::HashSet<String> {
        let online = self.by_name.values().map(|t| (t.name.as_str(), t.partitions.len() as i32));
        // An offline topic's directories are its data, not strays.
        let offline = self.offline.values().map(|t| (t.record.name.as_str(), t.record.partition_count));
        online.chain(offline).flat_map(|(name, count)| (0..count).map(move |i| partition_dir_name(name, i))).collect()
    }

    /// A registered topic whose name equals `name` once '.' and '_' are treated
    /// alike (Kafka refuses such pairs: their metric names collide).
    pub fn colliding(&self, name: &str) -> Option<String> {
        let key = name.replace('.', "_");
        self.by_name.keys().find(|n| n.as_str() != name && n.replace('.', "_") == key).cloned()
    }
}

/// The group coordinator reads topic ids and partition counts through this
/// (under the registry's read lock, taken inside the coordinator's lock: the
/// registry's holders never wait for the coordinator).
impl crate::group::TopicLookup for TopicRegistry {
    fn topic(&self, name: &str) -> Option<(Uuid, i32)> {
        self.by_name.get(name).map(|t| (t.id, t.partitions.len() as i32))
    }

    fn topic_name(&self, id: Uuid) -> Option<String> {
        self.by_id.get(&id).map(|t| t.name.clone())
    }

    fn topic_names(&self) -> Vec<String> {
        self.by_name.keys().cloned().collect()
    }
}

/// Why a topic name is refused, in Kafka's words (`Topic.validate`: the
/// checks in its order, the length in characters).
pub fn validate_topic_name(name: &str) -> Result<(), String> {
    let why = if name.is_empty() {
        "the empty string is not allowed".to_owned()
    } else if name == "." || name == ".." {
        format!("'{name}' is not allowed")
    } else if name.chars().count() > TOPIC_NAME_CHARS_MAX {
        format!("the length of '{name}' is longer than the max allowed length {TOPIC_NAME_CHARS_MAX}")
    } else if !name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')) {
        format!("'{name}' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'")
    } else {
        return Ok(());
    };
    Err(format!("Topic name is invalid: {why}"))
}

fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> LogError + '_ {
    move |source| LogError::Io { path: path.to_path_buf(), source }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_names_follow_kafka_rules() {
        assert!(validate_topic_name("orders.v1_x-2").is_ok());
        assert!(validate_topic_name("").is_err());
        assert!(validate_topic_name(".").is_err());
        assert!(validate_topic_name("..").is_err());
        assert!(validate_topic_name("bad name!").is_err());
        assert!(validate_topic_name(&"a".repeat(249)).is_ok());
        assert!(validate_topic_name(&"a".repeat(250)).is_err());
        assert_eq!(
            validate_topic_name("bad!"),
            Err("Topic name is invalid: 'bad!' contains one or more characters other than ASCII alphanumerics, \
                 '.', '_' and '-'"
                .into())
        );
        assert_eq!(validate_topic_name(".."), Err("Topic name is invalid: '..' is not allowed".into()));
    }

    #[test]
    fn every_legal_topic_name_gives_directory_names_a_base_backup_carries() {
        // pg_basebackup's tar refuses paths over 99 bytes; the longest files a
        // partition directory holds:
        let longest_file = [
            format!("{}{}", kafgres_log::checkpoint::RECOVERY_POINT_FILE, kafgres_log::storage::TMP_SUFFIX),
            format!("{:020}{}{}", 0, kafgres_log::segment::TIME_INDEX_SUFFIX, kafgres_log::cleaner::CLEANED_SUFFIX),
        ]
        .iter()
        .map(String::len)
        .max()
        .unwrap_or(0);
        assert!("kafgres/".len() + DIR_NAME_BYTES_MAX + 1 + longest_file <= 99, "longest file {longest_file}");
        for len in [1usize, 40, 47, 48, 205, 249] {
            let topic = "t".repeat(len);
            for index in [0, 7, 99_999, i32::MAX] {
                let dir = partition_dir_name(&topic, index);
                assert!(dir.len() <= DIR_NAME_BYTES_MAX, "{len}-character topic, partition {index}: {}", dir.len());
                assert!(dir.ends_with(&format!("-{index}")));
                for tag in ["deleted", "stale", "stray"] {
                    let aside = crate::log_dir::deleted_dir_name(&Path::new("/logs").join(&dir), tag);
                    let name = aside.file_name().expect("a name").to_string_lossy().into_owned();
                    assert!(
                        name.len() <= DIR_NAME_BYTES_MAX && name.ends_with(crate::log_dir::DELETED_DIR_SUFFIX),
                        "{name}"
                    );
                }
            }
        }
        assert_eq!(partition_dir_name("orders", 3), "orders-3", "short names stay Kafka's");
    }

    #[test]
    fn a_long_directory_of_release_0_1_is_adopted_under_its_new_name() {
        let logs = tempfile::tempdir().expect("tempdir");
        let topic = "a-topic-name-long-enough-that-its-directory-is-renamed";
        let legacy = logs.path().join(format!("{topic}-0"));
        std::fs::create_dir(&legacy).expect("mkdir");
        std::fs::write(legacy.join("00000000000000000000.log"), b"records").expect("write");
        let dir = partition_dir(logs.path(), topic, 0);
        assert_ne!(dir, legacy);
        adopt_legacy_dir(logs.path(), &dir, topic, 0).expect("adopts");
        assert!(!legacy.exists());
        assert_eq!(std::fs::read(dir.join("00000000000000000000.log")).expect("moved"), b"records");
        // Idempotent, and a short name is left alone.
        adopt_legacy_dir(logs.path(), &dir, topic, 0).expect("again");
        let short = partition_dir(logs.path(), "short", 1);
        std::fs::create_dir(&short).expect("mkdir");
        adopt_legacy_dir(logs.path(), &short, "short", 1).expect("short");
        assert!(short.is_dir());
    }

    #[test]
    fn long_names_stay_distinct_and_stable() {
        let a = format!("{}a", "x".repeat(248));
        let b = format!("{}b", "x".repeat(248));
        assert_ne!(partition_dir_name(&a, i32::MAX), partition_dir_name(&b, i32::MAX));
        assert_eq!(partition_dir_name(&a, i32::MAX), partition_dir_name(&a, i32::MAX));
        assert_eq!(fnv1a_64(b""), 0xcbf2_9ce4_8422_2325, "the hash must never change");
        assert_eq!(fnv1a_64(b"a"), 0xaf63_dc4c_8601_ec8c, "the hash must never change");
    }
}
