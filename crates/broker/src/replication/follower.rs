//! The follower: a standby's broker copying every partition from the leader
//! (the primary's broker), as a Kafka follower does (docs/replication.md).
//!
//! One task, one connection. On each (re)connection it reads the leader's
//! topics (Metadata, and the configs that act on a log) and makes the local
//! registry match; it asks the leader where each local partition's latest
//! epoch ends (OffsetForLeaderEpoch) and truncates what lies past it (a tail
//! the leader never had: this node was a primary that lost a failover, or
//! its copy was taken while the leader wrote). Then it loops: Fetch from the
//! local log end of every partition (plus the catalog version), append the
//! leader's batches byte for byte, wait for their fdatasync, fetch again. The
//! next fetch's offsets are the acknowledgement the leader's synchronous
//! produces wait for, so they are sent only once the records are durable.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kafgres_record::{peek_offset_and_size, validate_batches};
use kafgres_wire::error_code;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic, ReplicaState};
use kafka_protocol::messages::offset_for_leader_epoch_request::{OffsetForLeaderPartition, OffsetForLeaderTopic};
use kafka_protocol::messages::{
    BrokerId, DescribeConfigsRequest, FetchRequest, MetadataRequest, OffsetForLeaderEpochRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use tokio::sync::watch;
use uuid::Uuid;

use super::leader_link::{LeaderLink, LinkError};
use super::CATALOG_TOPIC_ID;
use crate::catalog::TopicRecord;
use crate::partition::Partition;
use crate::topic_admin::TopicAdmin;
use crate::topics::{Topic, Topics};

/// Versions the follower sends (all served by a Kafgres leader).
const FETCH_VERSION: i16 = 15;
const METADATA_VERSION: i16 = 12;
const OFFSET_FOR_LEADER_EPOCH_VERSION: i16 = 4;
const DESCRIBE_CONFIGS_VERSION: i16 = 4;
/// The configs a follower's log acts on; the others are the leader's business.
const LOG_CONFIGS: &[&str] = &[
    "segment.bytes",
    "segment.ms",
    "retention.ms",
    "retention.bytes",
    "cleanup.policy",
    "delete.retention.ms",
    "min.cleanable.dirty.ratio",
    "min.compaction.lag.ms",
    "max.compaction.lag.ms",
    "max.message.bytes",
    "message.timestamp.type",
];

/// How a follower finds and talks to its leader.
#[derive(Debug, Clone)]
pub struct FollowerConfig {
    /// `host:port` of the leader's Kafka listener.
    pub leader: String,
    /// This standby's name (its walreceiver's application_name): what the
    /// leader's synchronous policy names; sent as the fetch's rack id.
    pub name: String,
    pub node_id: i32,
    /// The longest a fetch waits on the leader for new records.
    pub fetch_wait_ms: i32,
    pub fetch_bytes_max: i32,
    pub partition_bytes_max: i32,
    pub request_timeout: Duration,
    pub frame_bytes_max: usize,
    /// The cluster's internal secret (replicated with the catalog): the
    /// follower logs in to its leader with `KAFGRES-INTERNAL` as the
    /// internal superuser, so it copies under SASL and under the ACLs.
    pub internal_secret: Option<String>,
}

impl FollowerConfig {
    pub fn new(leader: String, name: String, node_id: i32) -> FollowerConfig {
        FollowerConfig {
            leader,
            name,
            node_id,
            fetch_wait_ms: 500,
            fetch_bytes_max: 64 << 20,
            partition_bytes_max: 16 << 20,
            request_timeout: Duration::from_secs(30),
            frame_bytes_max: 100 << 20,
            internal_secret: None,
        }
    }
}

/// What the follower is doing, for the standby's status view.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FollowerProgress {
    pub connected: bool,
    pub leader_epoch: i32,
    pub last_error: Option<String>,
    pub records_fetched: u64,
    pub bytes_fetched: u64,
    pub records_truncated: u64,
    /// Records the leader had (its high watermarks) that the copy had not
    /// yet, summed over partitions, as of the last fetch.
    pub lag_records: i64,
    /// When the last fetch was answered (ms since the Unix epoch; 0: never).
    pub last_fetch_ms: i64,
}

/// The follower's shared status.
#[derive(Debug, Default)]
pub struct FollowerState {
    progress: Mutex<FollowerProgress>,
    board: std::sync::OnceLock<&'static super::board::ReplicationBoard>,
}

impl FollowerState {
    /// A state that also publishes to `board` (shared memory, for SQL).
    pub fn with_board(board: &'static super::board::ReplicationBoard) -> FollowerState {
        let state = FollowerState::default();
        let _ = state.board.set(board);
        state
    }

    pub fn progress(&self) -> FollowerProgress {
        self.progress.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn update(&self, f: impl FnOnce(&mut FollowerProgress)) {
        let mut progress = self.progress.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut progress);
        if let Some(board) = self.board.get() {
            board.publish_following(
                progress.connected,
                progress.leader_epoch,
                progress.records_fetched,
                progress.bytes_fetched,
                progress.records_truncated,
                progress.lag_records,
                progress.last_fetch_ms,
            );
        }
    }
}

#[derive(Debug, thiserror::Error)]
enum FollowError {
    #[error(transparent)]
    Link(#[from] LinkError),
    #[error("{0}")]
    Leader(String),
    #[error("{0}")]
    Local(String),
}

/// Follows the leader until `shutdown` changes; reconnects with a backoff.
pub async fn run(
    ctx: Arc<crate::context::BrokerContext>,
    config: FollowerConfig,
    state: Arc<FollowerState>,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut backoff = Duration::from_millis(100);
    let mut reported: Option<String> = None;
    loop {
        let session = follow(&ctx.topics, &ctx.topic_admin, &config, &ctx.config.cluster_id, &state);
        let ended = tokio::select! {
            _ = shutdown.changed() => return,
            ended = session => ended,
        };
        state.update(|p| p.connected = false);
        if let Err(e) = ended {
            backoff = if matches!(e, FollowError::Link(_)) { backoff } else { Duration::from_millis(100) };
            let message = e.to_string();
            // One line per change of reason, not one per retry.
            if reported.as_deref() != Some(message.as_str()) {
                log::warn!("following the leader at {}: {message}; retrying", config.leader);
                reported = Some(message.clone());
            }
            state.update(|p| p.last_error = Some(message));
        }
        tokio::select! {
            _ = shutdown.changed() => return,
            _ = tokio::time::sleep(backoff) => {}
        }
        backoff = (backoff * 2).min(Duration::from_secs(5));
    }
}

/// Per partition, where the next fetch starts when it is not the log end (a
/// leader whose log starts past ours: the copy restarts at its log start).
type Overrides = HashMap<(Uuid, i32), i64>;

/// Partitions no longer fetched: the leader has none of their history
/// ([`truncate_diverged`]). For the session: a reconnection asks again.
type Quarantine = std::collections::HashSet<(Uuid, i32)>;

async fn follow(
    topics: &Topics,
    admin: &TopicAdmin,
    config: &FollowerConfig,
    cluster_id: &str,
    state: &FollowerState,
) -> Result<(), FollowError> {
    let mut link = LeaderLink::connect(&config.leader, config.request_timeout, config.frame_bytes_max).await?;
    if let Some(secret) = &config.internal_secret {
        link.log_in(secret, config.request_timeout).await?;
    }
    let mut leader_epoch = sync_catalog(&mut link, topics, admin, config, cluster_id).await?;
    let mut catalog_seen = -1i64;
    let mut quarantine = Quarantine::new();
    truncate_diverged(&mut link, topics, config, leader_epoch, state, &mut quarantine).await?;
    state.update(|p| {
        p.connected = true;
        p.leader_epoch = leader_epoch;
        p.last_error = None;
    });
    log::info!("following the leader at {} (epoch {leader_epoch}) as {}", config.leader, config.name);
    let mut overrides: Overrides = HashMap::new();
    loop {
        let partitions: Vec<(Uuid, Arc<Partition>)> = topics
            .all()
            .iter()
            .flat_map(|t| t.partitions.iter().map(move |p| (t.id, Arc::clone(p))))
            .filter(|(id, p)| !quarantine.contains(&(*id, p.index)))
            .collect();
        let request = fetch_request(config, &partitions, &overrides, catalog_seen, leader_epoch);
        let timeout = config.request_timeout + Duration::from_millis(config.fetch_wait_ms as u64);
        let response = link.call(FETCH_VERSION, &request, timeout).await?;
        if response.error_code != error_code::NONE {
            return Err(FollowError::Leader(format!(
                "Fetch answered {}",
                error_code::name(response.error_code).unwrap_or("UNKNOWN")
            )));
        }
        let by_key: HashMap<(Uuid, i32), &Arc<Partition>> =
            partitions.iter().map(|(id, p)| ((*id, p.index), p)).collect();
        let mut appended: Vec<(Arc<Partition>, i64)> = Vec::new();
        let mut leader_ahead: Vec<(Arc<Partition>, i64)> = Vec::new();
        let mut resync = false;
        let mut revalidate = false;
        for topic in &response.responses {
            if topic.topic_id == CATALOG_TOPIC_ID {
                let version = topic.partitions.first().map_or(-1, |p| p.high_watermark);
                if version > catalog_seen {
                    if catalog_seen >= 0 {
                        resync = true;
                    }
                    catalog_seen = version;
                }
                continue;
            }
            for data in &topic.partitions {
                let Some(partition) = by_key.get(&(topic.topic_id, data.partition_index)) else { continue };
                match data.error_code {
                    error_code::NONE => {}
                    error_code::UNKNOWN_TOPIC_ID | error_code::UNKNOWN_TOPIC_OR_PARTITION => {
                        resync = true;
                        continue;
                    }
                    error_code::FENCED_LEADER_EPOCH | error_code::UNKNOWN_LEADER_EPOCH => {
                        resync = true;
                        revalidate = true;
                        continue;
                    }
                    error_code::OFFSET_OUT_OF_RANGE => {
                        if data.log_start_offset > partition.log_end_offset() {
                            // The leader no longer has what follows ours:
                            // continue the copy at its log start.
                            overrides.insert((topic.topic_id, data.partition_index), data.log_start_offset);
                        } else {
                            revalidate = true;
                        }
                        continue;
                    }
                    other => {
                        log::warn!(
                            "following {}-{}: the leader answered {}",
                            partition.topic,
                            partition.index,
                            error_code::name(other).unwrap_or("UNKNOWN")
                        );
                        continue;
                    }
                }
                if data.diverging_epoch.epoch >= 0 || data.diverging_epoch.end_offset >= 0 {
                    let end = data.diverging_epoch.end_offset;
                    truncate(partition, end, state).await?;
                    continue;
                }

                leader_ahead.push((Arc::clone(partition), data.high_watermark));
                let Some(records) = data.records.as_ref().filter(|r| !r.is_empty()) else { continue };
                let whole = whole_batches(records);
                if whole.is_empty() {
                    continue;
                }
                let validated = validate_batches(whole)
                    .map_err(|e| FollowError::Leader(format!("{}-{}: {e}", partition.topic, partition.index)))?;
                let now = crate::now_ms();
                match partition.append_replicated(whole, &validated.headers, now) {
                    Ok(result) => {
                        overrides.remove(&(topic.topic_id, data.partition_index));
                        state.update(|p| {
                            p.records_fetched += validated.records.max(0) as u64;
                            p.bytes_fetched += whole.len() as u64;
                        });
                        appended.push((Arc::clone(partition), result.end.offset));
                    }
                    Err(e) => {
                        log::warn!(
                            "following {}-{}: {e}; checking where its log diverged",
                            partition.topic,
                            partition.index
                        );
                        revalidate = true;
                    }
                }
                // The leader's retention and DeleteRecords move its log start;
                // the copy follows (below what it holds durably only).
                if data.log_start_offset > partition.log_start_offset() {
                    align_log_start(partition, data.log_start_offset).await;
                }
            }
        }
        // The next fetch acknowledges: only once what was appended is durable.
        for (partition, end) in appended {
            partition
                .wait_durable(end)
                .await
                .map_err(|e| FollowError::Local(format!("{}-{}: {e}", partition.topic, partition.index)))?;
        }
        let lag_records: i64 = leader_ahead.iter().map(|(p, hw)| (hw - p.log_end_offset()).max(0)).sum();
        state.update(|p| {
            p.lag_records = lag_records;
            p.last_fetch_ms = crate::now_ms();
        });
        if resync {
            leader_epoch = sync_catalog(&mut link, topics, admin, config, cluster_id).await?;
            state.update(|p| p.leader_epoch = leader_epoch);
        }
        if revalidate {
            truncate_diverged(&mut link, topics, config, leader_epoch, state, &mut quarantine).await?;
        }
    }
}

fn fetch_request(
    config: &FollowerConfig,
    partitions: &[(Uuid, Arc<Partition>)],
    overrides: &Overrides,
    catalog_seen: i64,
    leader_epoch: i32,
) -> FetchRequest {
    let mut by_topic: BTreeMap<Uuid, Vec<FetchPartition>> = BTreeMap::new();
    for (topic_id, p) in partitions {
        let fetch_offset = overrides.get(&(*topic_id, p.index)).copied().unwrap_or_else(|| p.log_end_offset());
        by_topic.entry(*topic_id).or_default().push(
            FetchPartition::default()
                .with_partition(p.index)
                .with_current_leader_epoch(leader_epoch)
                .with_fetch_offset(fetch_offset)
                .with_last_fetched_epoch(p.latest_epoch().unwrap_or(-1))
                .with_log_start_offset(p.log_start_offset())
                .with_partition_max_bytes(config.partition_bytes_max),
        );
    }
    let mut topics: Vec<FetchTopic> = by_topic
        .into_iter()
        .map(|(topic_id, partitions)| FetchTopic::default().with_topic_id(topic_id).with_partitions(partitions))
        .collect();
    topics.push(FetchTopic::default().with_topic_id(CATALOG_TOPIC_ID).with_partitions(vec![FetchPartition::default()
            .with_partition(0)
            .with_fetch_offset(catalog_seen)
            .with_current_leader_epoch(-1)
            .with_last_fetched_epoch(-1)
            .with_partition_max_bytes(0)]));
    FetchRequest::default()
        .with_replica_state(ReplicaState::default().with_replica_id(BrokerId(config.node_id)).with_replica_epoch(-1))
        .with_max_wait_ms(config.fetch_wait_ms)
        .with_min_bytes(1)
        .with_max_bytes(config.fetch_bytes_max)
        .with_isolation_level(0)
        .with_session_id(0)
        .with_session_epoch(-1)
        .with_topics(topics)
        .with_rack_id(StrBytes::from_string(config.name.clone()))
}

/// The whole batches at the start of `records` (a fetch may end inside one).
fn whole_batches(records: &[u8]) -> &[u8] {
    let mut end = 0;
    while let Some((_, size)) = peek_offset_and_size(&records[end..]) {
        if end + size > records.len() {
            break;
        }
        end += size;
    }
    &records[..end]
}

/// Makes the local topics those of the leader; returns the leader's epoch.
async fn sync_catalog(
    link: &mut LeaderLink,
    topics: &Topics,
    admin: &TopicAdmin,
    config: &FollowerConfig,
    cluster_id: &str,
) -> Result<i32, FollowError> {
    let metadata = link
        .call(
            METADATA_VERSION,
            &MetadataRequest::default().with_topics(None).with_allow_auto_topic_creation(false),
            config.request_timeout,
        )
        .await?;
    // The copy deletes what the leader lacks: never for another cluster's
    // broker (a wrong address), whose topics are not ours to mirror.
    let leader_cluster = metadata.cluster_id.as_ref().map(|c| c.as_str()).unwrap_or("");
    if leader_cluster != cluster_id {
        return Err(FollowError::Leader(format!(
            "the broker at {} belongs to cluster {leader_cluster:?}, not to this standby's {cluster_id:?}; \
             nothing is copied (check kafgres.primary_kafka_address or the primary's kafgres.advertised_host)",
            config.leader
        )));
    }
    let mut leader_epoch = -1;
    let mut wanted: Vec<(Uuid, String, i32)> = Vec::new();
    for t in &metadata.topics {
        let Some(name) = t.name.as_ref() else { continue };
        if t.error_code != error_code::NONE && t.error_code != error_code::LEADER_NOT_AVAILABLE {
            continue;
        }
        leader_epoch = leader_epoch.max(t.partitions.iter().map(|p| p.leader_epoch).max().unwrap_or(-1));
        wanted.push((t.topic_id, name.0.to_string(), t.partitions.len() as i32));
    }
    let configs = topic_configs(link, config, wanted.iter().map(|(_, n, _)| n.as_str())).await?;
    let change = admin.begin().await;
    // Gone from the leader (or re-created there under another id): delete here.
    for local in topics.all() {
        if !wanted.iter().any(|(id, _, _)| *id == local.id) {
            log::info!("topic {} is gone from the leader; deleting the copy", local.name);
            change.delete(local).await.map_err(|e| FollowError::Local(e.to_string()))?;
        }
    }
    for (id, name, count) in wanted {
        let configs = configs.get(&name).cloned().unwrap_or_default();
        match topics.get_by_id(&id) {
            None => {
                log::info!("copying topic {name} from the leader ({count} partitions)");
                let record = TopicRecord { topic_id: id, name, partition_count: count, configs };
                change.create(record).await.map_err(|e| FollowError::Local(e.to_string()))?;
            }
            Some(local) => {
                if (local.partitions.len() as i32) < count {
                    change.set_partition_count(&local, count).await.map_err(|e| FollowError::Local(e.to_string()))?;
                }
                let local: Arc<Topic> = topics.get_by_id(&id).unwrap_or(local);
                if local.configs != configs {
                    change.set_configs(&local, configs).await.map_err(|e| FollowError::Local(e.to_string()))?;
                }
            }
        }
    }
    Ok(leader_epoch)
}

/// The overrides of the configs a follower's log acts on, per topic.
async fn topic_configs<'a>(
    link: &mut LeaderLink,
    config: &FollowerConfig,
    names: impl Iterator<Item = &'a str>,
) -> Result<HashMap<String, BTreeMap<String, String>>, FollowError> {
    let resources: Vec<DescribeConfigsResource> = names
        .map(|name| {
            DescribeConfigsResource::default()
                .with_resource_type(2)
                .with_resource_name(StrBytes::from_string(name.to_owned()))
                .with_configuration_keys(Some(LOG_CONFIGS.iter().map(|k| StrBytes::from_static_str(k)).collect()))
        })
        .collect();
    if resources.is_empty() {
        return Ok(HashMap::new());
    }
    let response = link
        .call(
            DESCRIBE_CONFIGS_VERSION,
            &DescribeConfigsRequest::default().with_resources(resources),
            config.request_timeout,
        )
        .await?;
    // DescribeConfigs' config source 1 is a topic's own override.
    const TOPIC_CONFIG_SOURCE: i8 = 1;
    Ok(response
        .results
        .iter()
        .filter(|r| r.error_code == error_code::NONE)
        .map(|r| {
            let overrides = r
                .configs
                .iter()
                .filter(|c| c.config_source == TOPIC_CONFIG_SOURCE)
                .filter_map(|c| c.value.as_ref().map(|v| (c.name.to_string(), v.to_string())))
                .collect();
            (r.resource_name.to_string(), overrides)
        })
        .collect())
}

/// Asks the leader where each local partition's latest epoch ends and cuts
/// what lies past it. A partition whose records the leader has no history
/// of at all (its log is empty, or all its epochs are older than this
/// copy's) is not cut: the leader lost what this copy holds (a primary
/// whose log directory was lost, or a stale primary back as the leader), so
/// the copy is kept and no longer fetched ([`Quarantine`]), and the leader's
/// acks=all produces for it wait: an operator decides.
async fn truncate_diverged(
    link: &mut LeaderLink,
    topics: &Topics,
    config: &FollowerConfig,
    leader_epoch: i32,
    state: &FollowerState,
    quarantine: &mut Quarantine,
) -> Result<(), FollowError> {
    let mut asked: Vec<(Uuid, Arc<Partition>, i32)> = Vec::new();
    let mut request_topics: Vec<OffsetForLeaderTopic> = Vec::new();
    for topic in topics.all() {
        let mut partitions = Vec::new();
        for p in &topic.partitions {
            let Some(epoch) = p.latest_epoch() else { continue };
            partitions.push(
                OffsetForLeaderPartition::default()
                    .with_partition(p.index)
                    .with_current_leader_epoch(leader_epoch)
                    .with_leader_epoch(epoch),
            );
            asked.push((topic.id, Arc::clone(p), epoch));
        }
        if !partitions.is_empty() {
            request_topics.push(
                OffsetForLeaderTopic::default()
                    .with_topic(TopicName(StrBytes::from_string(topic.name.clone())))
                    .with_partitions(partitions),
            );
        }
    }
    if request_topics.is_empty() {
        return Ok(());
    }
    let request =
        OffsetForLeaderEpochRequest::default().with_replica_id(BrokerId(config.node_id)).with_topics(request_topics);
    let response = link.call(OFFSET_FOR_LEADER_EPOCH_VERSION, &request, config.request_timeout).await?;
    for topic in &response.topics {
        for answer in &topic.partitions {
            let Some((topic_id, partition, epoch)) =
                asked.iter().find(|(_, p, _)| p.topic == topic.topic.0.as_str() && p.index == answer.partition)
            else {
                continue;
            };
            if answer.error_code != error_code::NONE {
                continue;
            }
            if answer.end_offset < 0 {
                if partition.log_end_offset() > partition.log_start_offset()
                    && quarantine.insert((*topic_id, partition.index))
                {
                    log::error!(
                        "{}-{}: the leader has no history of epoch {epoch}, which this copy holds up to offset {}: \
                         it lost records this standby has (a lost log directory, or an older primary leading \
                         again). The copy is kept and no longer fetched, and acks=all for this partition waits on \
                         the leader. To keep these records, fail over to this standby; to follow the leader \
                         anyway, remove this partition's directory here and restart the standby",
                        partition.topic,
                        partition.index,
                        partition.log_end_offset()
                    );
                }
                continue;
            }
            if answer.end_offset < partition.log_end_offset() {
                truncate(partition, answer.end_offset, state).await?;
            }
        }
    }
    Ok(())
}

/// Cuts a partition's copy at `offset` (a tail the leader does not have).
async fn truncate(partition: &Arc<Partition>, offset: i64, state: &FollowerState) -> Result<(), FollowError> {
    let before = partition.log_end_offset();
    if offset >= before {
        return Ok(());
    }
    let p = Arc::clone(partition);
    let end = tokio::task::spawn_blocking(move || p.truncate_to(offset))
        .await
        .map_err(|e| FollowError::Local(format!("truncation task failed: {e}")))?
        .map_err(|e| FollowError::Local(format!("{}-{}: {e}", partition.topic, partition.index)))?;
    let cut = before - end;
    log::warn!(
        "{}-{}: truncated {cut} record offset(s) ({end}..{before}) that the leader does not have",
        partition.topic,
        partition.index
    );
    state.update(|p| p.records_truncated += cut.max(0) as u64);
    Ok(())
}

async fn align_log_start(partition: &Arc<Partition>, leader_log_start: i64) {
    let p = Arc::clone(partition);
    let target = leader_log_start.min(partition.high_watermark().offset);
    if target <= partition.log_start_offset() {
        return;
    }
    match tokio::task::spawn_blocking(move || p.delete_records(target)).await {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => log::warn!("{}-{}: moving the log start to {target}: {e}", partition.topic, partition.index),
        Err(e) => log::warn!("moving a log start failed: {e}"),
    }
}
