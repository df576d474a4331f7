//! The broker-wide state of replication: this broker's leader epoch, the
//! synchronous policy, and the followers it has seen.
//!
//! Shared by every partition (an `Arc` each holds) and by the Fetch handler,
//! which reports each follower fetch here. A follower counts as connected
//! while it fetched within [`ReplicationState::lag_time_max`] (Kafka's
//! `replica.lag.time.max.ms`); a follower long-polls with a short maximum
//! wait, so a live one fetches far more often than that.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Mutex, OnceLock, RwLock};
use std::time::{Duration, Instant};

use super::board::ReplicationBoard;
use super::SyncPolicy;

/// How long a follower may go without fetching and still count as connected
/// (Kafka's `replica.lag.time.max.ms` is 30 s; a Kafgres follower long-polls
/// with a 500 ms wait).
pub const LAG_TIME_MAX_DEFAULT: Duration = Duration::from_secs(10);

/// One follower as the leader saw it last.
#[derive(Debug, Clone)]
pub struct FollowerInfo {
    pub node_id: i32,
    pub connected_since: Instant,
    pub last_fetch: Instant,
    /// When the follower last held everything the leader had (its fetch
    /// offsets at every partition's log end): how far behind it is in time.
    pub caught_up_at: Option<Instant>,
}

/// A follower's row in the replication status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FollowerStatus {
    pub name: String,
    pub node_id: i32,
    pub connected: bool,
    pub connected_for_ms: u64,
    pub last_fetch_ms_ago: u64,
    /// Whether the synchronous policy names it.
    pub named: bool,
}

#[derive(Debug)]
pub struct ReplicationState {
    leader_epoch: AtomicI32,
    sync: RwLock<Option<SyncPolicy>>,
    followers: Mutex<HashMap<String, FollowerInfo>>,
    lag_time_max: Duration,
    board: OnceLock<&'static ReplicationBoard>,
}

impl ReplicationState {
    pub fn new(leader_epoch: i32, sync: Option<SyncPolicy>, lag_time_max: Duration) -> ReplicationState {
        ReplicationState {
            leader_epoch: AtomicI32::new(leader_epoch),
            sync: RwLock::new(sync),
            followers: Mutex::new(HashMap::new()),
            lag_time_max,
            board: OnceLock::new(),
        }
    }

    /// Publishes what follows to `board` too (the broker attaches its
    /// metrics' board when it starts).
    pub fn attach_board(&self, board: &'static ReplicationBoard) {
        let _ = self.board.set(board);
    }

    /// The epoch this broker stamps on the batches it appends.
    pub fn leader_epoch(&self) -> i32 {
        self.leader_epoch.load(Ordering::Acquire)
    }

    pub fn lag_time_max(&self) -> Duration {
        self.lag_time_max
    }

    /// The synchronous policy (None: acks=all waits for no standby).
    pub fn sync_policy(&self) -> Option<SyncPolicy> {
        self.sync.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub fn sync_required(&self) -> bool {
        self.sync.read().unwrap_or_else(|p| p.into_inner()).is_some()
    }

    /// Replaces the policy (a reload of `synchronous_standby_names`); the
    /// caller then asks every partition to recompute what is replicated.
    pub fn set_sync_policy(&self, policy: Option<SyncPolicy>) {
        *self.sync.write().unwrap_or_else(|p| p.into_inner()) = policy;
    }

    /// Records a fetch by follower `name`; `lag_records` is what it had not
    /// fetched yet below the log ends.
    pub fn saw_follower(&self, name: &str, node_id: i32, caught_up: bool, lag_records: i64) {
        let now = Instant::now();
        let now_ms = crate::now_ms();
        let board = self.board.get();
        let mut followers = self.followers.lock().unwrap_or_else(|p| p.into_inner());
        let lag_time_max = self.lag_time_max;
        let entry = followers.entry(name.to_owned()).or_insert_with(|| {
            log::info!("follower {name} (node {node_id}) is fetching");
            FollowerInfo { node_id, connected_since: now, last_fetch: now, caught_up_at: None }
        });
        if now.duration_since(entry.last_fetch) > lag_time_max {
            log::info!("follower {name} (node {node_id}) is fetching again");
            entry.connected_since = now;
            if let Some(board) = board {
                board.follower_reconnected(name, now_ms);
            }
        }
        if let Some(board) = board {
            board.follower_fetched(name, node_id, now_ms, caught_up, lag_records);
        }
        entry.node_id = node_id;
        entry.last_fetch = now;
        if caught_up {
            entry.caught_up_at = Some(now);
        }
    }

    /// Whether follower `name` fetched recently enough to count.
    pub fn is_connected(&self, name: &str) -> bool {
        let followers = self.followers.lock().unwrap_or_else(|p| p.into_inner());
        followers.get(name).is_some_and(|f| f.last_fetch.elapsed() <= self.lag_time_max)
    }

    pub fn status(&self) -> Vec<FollowerStatus> {
        let policy = self.sync_policy();
        let followers = self.followers.lock().unwrap_or_else(|p| p.into_inner());
        let mut rows: Vec<FollowerStatus> = followers
            .iter()
            .map(|(name, f)| FollowerStatus {
                name: name.clone(),
                node_id: f.node_id,
                connected: f.last_fetch.elapsed() <= self.lag_time_max,
                connected_for_ms: f.connected_since.elapsed().as_millis() as u64,
                last_fetch_ms_ago: f.last_fetch.elapsed().as_millis() as u64,
                named: policy.as_ref().is_some_and(|p| p.priority(name).is_some()),
            })
            .collect();
        rows.sort_by(|a, b| a.name.cmp(&b.name));
        rows
    }
}
