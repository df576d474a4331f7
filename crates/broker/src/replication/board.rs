//! The replication board: what this node's replication is doing, in a block
//! of atomics that the extension keeps in Postgres shared memory (inside
//! [`crate::metrics::BrokerMetrics`]), so that any backend can read it for
//! the `kafgres.replication` and `kafgres.replicas` views while the data
//! plane writes it.
//!
//! A leader lists the followers that fetch from it, one slot each (by name,
//! never freed while the broker runs: a standby has one name); a standby
//! fills in its own following. Fields are independent atomics: a reader may
//! see one field of a slot a fetch newer than another, which a status view
//! tolerates; a slot's name is written once, before the slot is published.
//!
//! What does not fit in a fixed block (each follower's position in each
//! partition, for `kafgres.replica_partitions`) is asked for instead: a
//! backend takes a ticket ([`ReplicationBoard::request_status`]), the worker
//! writes the rows to a file and marks the ticket answered, then sets the
//! latch of every waiter listed (a backend lists itself before it asks, so
//! the answer cannot pass it by).

use std::sync::atomic::{AtomicI32, AtomicI64, AtomicU32, AtomicU64, Ordering};

/// Followers a leader lists (more are served, not listed).
pub const FOLLOWER_SLOTS: usize = 16;
/// Bytes of a follower's name kept (an application_name has at most 63).
pub const NAME_BYTES: usize = 64;
/// Backends that can wait for a status answer at once (more wait without
/// being woken, re-checking on their own bounded timeout).
pub const STATUS_WAITERS: usize = 16;

/// What this node is, as the board says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// No broker runs (or it has not started yet).
    Stopped,
    Leader,
    /// A standby's broker, copying from its leader.
    Follower,
}

#[repr(C)]
#[derive(Debug, Default)]
pub struct ReplicationBoard {
    /// 0 stopped, 1 leader, 2 follower.
    role: AtomicU32,
    node_id: AtomicI32,
    /// The epoch this node leads in, or on a standby the leader's (as last fetched).
    leader_epoch: AtomicI32,
    following: FollowingCounters,
    followers: [FollowerSlot; FOLLOWER_SLOTS],
    status: StatusRequests,
}

/// Tickets for the rows that do not fit here (see the module comment).
#[repr(C)]
#[derive(Debug, Default)]
struct StatusRequests {
    requested: AtomicU64,
    answered: AtomicU64,
    /// A waiting backend's PGPROC number plus one (0: a free slot).
    waiters: [AtomicI32; STATUS_WAITERS],
}

/// A standby's copy.
#[repr(C)]
#[derive(Debug, Default)]
struct FollowingCounters {
    connected: AtomicU32,
    records_fetched: AtomicU64,
    bytes_fetched: AtomicU64,
    records_truncated: AtomicU64,
    /// Records the leader had (its high watermarks) that the copy had not,
    /// summed over partitions, as of the last fetch.
    lag_records: AtomicI64,
    last_fetch_ms: AtomicI64,
}

#[repr(C)]
#[derive(Debug, Default)]
struct FollowerSlot {
    /// 0 free, 1 being claimed, 2 listed.
    state: AtomicU32,
    name_len: AtomicU32,
    name: [AtomicU64; NAME_BYTES / 8],
    node_id: AtomicI32,
    connected_since_ms: AtomicI64,
    last_fetch_ms: AtomicI64,
    /// When its fetch offsets last reached every partition's log end (0: never).
    caught_up_ms: AtomicI64,
    /// Records below the log ends it had not fetched yet, summed over partitions.
    lag_records: AtomicI64,
}

/// A follower as the leader's board lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FollowerRow {
    pub name: String,
    pub node_id: i32,
    pub connected_since_ms: i64,
    pub last_fetch_ms: i64,
    pub caught_up_ms: Option<i64>,
    pub lag_records: i64,
}

/// This node's row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeRow {
    pub role: Role,
    pub node_id: i32,
    pub leader_epoch: i32,
    /// A standby's copy (zeros on a leader).
    pub connected: bool,
    pub records_fetched: u64,
    pub bytes_fetched: u64,
    pub records_truncated: u64,
    pub lag_records: i64,
    pub last_fetch_ms: Option<i64>,
}

impl ReplicationBoard {
    /// A broker starting: forgets the previous run's followers and counters.
    pub fn reset(&self, role: Role, node_id: i32, leader_epoch: i32) {
        for slot in &self.followers {
            slot.state.store(0, Ordering::Release);
        }
        let f = &self.following;
        f.connected.store(0, Ordering::Relaxed);
        f.records_fetched.store(0, Ordering::Relaxed);
        f.bytes_fetched.store(0, Ordering::Relaxed);
        f.records_truncated.store(0, Ordering::Relaxed);
        f.lag_records.store(0, Ordering::Relaxed);
        f.last_fetch_ms.store(0, Ordering::Relaxed);
        self.node_id.store(node_id, Ordering::Relaxed);
        self.leader_epoch.store(leader_epoch, Ordering::Relaxed);
        self.set_role(role);
    }

    pub fn set_role(&self, role: Role) {
        let code = match role {
            Role::Stopped => 0,
            Role::Leader => 1,
            Role::Follower => 2,
        };
        self.role.store(code, Ordering::Release);
    }

    pub fn set_leader_epoch(&self, epoch: i32) {
        self.leader_epoch.store(epoch, Ordering::Relaxed);
    }

    /// A leader: records a fetch by follower `name`.
    pub fn follower_fetched(&self, name: &str, node_id: i32, now_ms: i64, caught_up: bool, lag_records: i64) {
        let Some(slot) = self.slot_for(name, now_ms) else { return };
        slot.node_id.store(node_id, Ordering::Relaxed);
        slot.last_fetch_ms.store(now_ms, Ordering::Relaxed);
        slot.lag_records.store(lag_records, Ordering::Relaxed);
        if caught_up {
            slot.caught_up_ms.store(now_ms, Ordering::Relaxed);
        }
    }

    /// A leader: a follower that fetches again after a silence counts as
    /// connected from now.
    pub fn follower_reconnected(&self, name: &str, now_ms: i64) {
        if let Some(slot) = self.slot_for(name, now_ms) {
            slot.connected_since_ms.store(now_ms, Ordering::Relaxed);
        }
    }

    fn slot_for(&self, name: &str, now_ms: i64) -> Option<&FollowerSlot> {
        let bytes = &name.as_bytes()[..name.len().min(NAME_BYTES)];
        if let Some(slot) = self.followers.iter().find(|s| s.state.load(Ordering::Acquire) == 2 && s.name_is(bytes)) {
            return Some(slot);
        }
        let slot = self.followers.iter().find(|s| {
            s.state.load(Ordering::Relaxed) == 0
                && s.state.compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed).is_ok()
        })?;
        for (i, word) in slot.name.iter().enumerate() {
            let mut chunk = [0u8; 8];
            let from = (i * 8).min(bytes.len());
            let to = (from + 8).min(bytes.len());
            chunk[..to - from].copy_from_slice(&bytes[from..to]);
            word.store(u64::from_le_bytes(chunk), Ordering::Relaxed);
        }
        slot.name_len.store(bytes.len() as u32, Ordering::Relaxed);
        slot.connected_since_ms.store(now_ms, Ordering::Relaxed);
        slot.caught_up_ms.store(0, Ordering::Relaxed);
        slot.state.store(2, Ordering::Release);
        Some(slot)
    }

    /// A standby: what its copy has done so far.
    #[allow(clippy::too_many_arguments)]
    pub fn publish_following(
        &self,
        connected: bool,
        leader_epoch: i32,
        records_fetched: u64,
        bytes_fetched: u64,
        records_truncated: u64,
        lag_records: i64,
        last_fetch_ms: i64,
    ) {
        let f = &self.following;
        f.connected.store(u32::from(connected), Ordering::Relaxed);
        f.records_fetched.store(records_fetched, Ordering::Relaxed);
        f.bytes_fetched.store(bytes_fetched, Ordering::Relaxed);
        f.records_truncated.store(records_truncated, Ordering::Relaxed);
        f.lag_records.store(lag_records, Ordering::Relaxed);
        f.last_fetch_ms.store(last_fetch_ms, Ordering::Relaxed);
        if leader_epoch >= 0 {
            self.leader_epoch.store(leader_epoch, Ordering::Relaxed);
        }
    }

    pub fn node(&self) -> NodeRow {
        let f = &self.following;
        let last_fetch_ms = f.last_fetch_ms.load(Ordering::Relaxed);
        NodeRow {
            role: match self.role.load(Ordering::Acquire) {
                1 => Role::Leader,
                2 => Role::Follower,
                _ => Role::Stopped,
            },
            node_id: self.node_id.load(Ordering::Relaxed),
            leader_epoch: self.leader_epoch.load(Ordering::Relaxed),
            connected: f.connected.load(Ordering::Relaxed) != 0,
            records_fetched: f.records_fetched.load(Ordering::Relaxed),
            bytes_fetched: f.bytes_fetched.load(Ordering::Relaxed),
            records_truncated: f.records_truncated.load(Ordering::Relaxed),
            lag_records: f.lag_records.load(Ordering::Relaxed),
            last_fetch_ms: (last_fetch_ms > 0).then_some(last_fetch_ms),
        }
    }

    /// A backend asks for the status rows: the ticket to wait for.
    pub fn request_status(&self) -> u64 {
        self.status.requested.fetch_add(1, Ordering::SeqCst) + 1
    }

    /// The worker: the latest ticket not yet answered, if any.
    pub fn status_wanted(&self) -> Option<u64> {
        let requested = self.status.requested.load(Ordering::SeqCst);
        (requested > self.status.answered.load(Ordering::SeqCst)).then_some(requested)
    }

    /// The worker wrote rows newer than every ticket up to `ticket`.
    pub fn status_answered(&self, ticket: u64) {
        self.status.answered.fetch_max(ticket, Ordering::SeqCst);
    }

    pub fn status_ready(&self, ticket: u64) -> bool {
        self.status.answered.load(Ordering::SeqCst) >= ticket
    }

    /// Lists a waiting backend by its PGPROC number; `None` when every slot
    /// is taken (it then waits unlisted).
    pub fn add_status_waiter(&self, procno: i32) -> Option<usize> {
        let code = procno.checked_add(1).filter(|c| *c > 0)?;
        self.status
            .waiters
            .iter()
            .position(|w| w.compare_exchange(0, code, Ordering::SeqCst, Ordering::Relaxed).is_ok())
    }

    pub fn remove_status_waiter(&self, slot: usize) {
        if let Some(w) = self.status.waiters.get(slot) {
            w.store(0, Ordering::SeqCst);
        }
    }

    /// The PGPROC numbers of the backends waiting for an answer.
    pub fn status_waiters(&self) -> Vec<i32> {
        self.status.waiters.iter().map(|w| w.load(Ordering::SeqCst)).filter(|c| *c > 0).map(|c| c - 1).collect()
    }

    /// The followers listed, by name.
    pub fn followers(&self) -> Vec<FollowerRow> {
        let mut rows: Vec<FollowerRow> = self
            .followers
            .iter()
            .filter(|s| s.state.load(Ordering::Acquire) == 2)
            .map(|s| {
                let caught_up = s.caught_up_ms.load(Ordering::Relaxed);
                FollowerRow {
                    name: s.name(),
                    node_id: s.node_id.load(Ordering::Relaxed),
                    connected_since_ms: s.connected_since_ms.load(Ordering::Relaxed),
                    last_fetch_ms: s.last_fetch_ms.load(Ordering::Relaxed),
                    caught_up_ms: (caught_up > 0).then_some(caught_up),
                    lag_records: s.lag_records.load(Ordering::Relaxed),
                }
            })
            .collect();
        rows.sort_by(|a, b| a.name.cmp(&b.name));
        rows
    }
}

impl FollowerSlot {
    fn name_bytes(&self) -> Vec<u8> {
        let len = (self.name_len.load(Ordering::Relaxed) as usize).min(NAME_BYTES);
        let mut bytes: Vec<u8> = self.name.iter().flat_map(|w| w.load(Ordering::Relaxed).to_le_bytes()).collect();
        bytes.truncate(len);
        bytes
    }

    fn name_is(&self, bytes: &[u8]) -> bool {
        self.name_bytes() == bytes
    }

    fn name(&self) -> String {
        String::from_utf8_lossy(&self.name_bytes()).into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn followers_are_listed_once_by_name_and_forgotten_at_reset() {
        let board = ReplicationBoard::default();
        board.reset(Role::Leader, 1, 7);
        board.follower_fetched("standby_a", 2, 1_000, false, 40);
        board.follower_fetched("standby_b", 3, 1_100, true, 0);
        board.follower_fetched("standby_a", 2, 1_200, true, 0);
        let rows = board.followers();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].name, "standby_a");
        assert_eq!(
            (rows[0].connected_since_ms, rows[0].last_fetch_ms, rows[0].caught_up_ms),
            (1_000, 1_200, Some(1_200))
        );
        assert_eq!(rows[0].lag_records, 0);
        assert_eq!(rows[1].node_id, 3);
        assert_eq!(board.node().role, Role::Leader);
        assert_eq!(board.node().leader_epoch, 7);
        board.reset(Role::Follower, 2, -1);
        assert!(board.followers().is_empty());
        assert_eq!(board.node().role, Role::Follower);
    }

    #[test]
    fn long_names_are_cut_and_extra_followers_are_not_listed() {
        let board = ReplicationBoard::default();
        let long = "x".repeat(100);
        board.follower_fetched(&long, 2, 5, false, 1);
        board.follower_fetched(&long, 2, 6, false, 1);
        assert_eq!(board.followers().len(), 1);
        assert_eq!(board.followers()[0].name.len(), NAME_BYTES);
        for i in 0..FOLLOWER_SLOTS + 3 {
            board.follower_fetched(&format!("f{i:02}"), 9, 7, false, 0);
        }
        assert_eq!(board.followers().len(), FOLLOWER_SLOTS);
    }

    #[test]
    fn a_status_ticket_is_answered_by_any_later_answer_and_waiters_are_listed() {
        let board = ReplicationBoard::default();
        assert_eq!(board.status_wanted(), None);
        let slot = board.add_status_waiter(0).expect("a free slot");
        let other = board.add_status_waiter(41).expect("a free slot");
        assert_eq!(board.status_waiters(), vec![0, 41]);
        let first = board.request_status();
        let second = board.request_status();
        assert!(!board.status_ready(first));
        // The worker answers the latest ticket at once, which answers both.
        assert_eq!(board.status_wanted(), Some(second));
        board.status_answered(second);
        assert!(board.status_ready(first) && board.status_ready(second));
        assert_eq!(board.status_wanted(), None);
        // An older answer never moves the mark back.
        board.status_answered(first);
        assert!(board.status_ready(second));
        board.remove_status_waiter(slot);
        assert_eq!(board.status_waiters(), vec![41]);
        board.remove_status_waiter(other);
        for procno in 0..STATUS_WAITERS as i32 {
            assert!(board.add_status_waiter(procno).is_some());
        }
        assert_eq!(board.add_status_waiter(99), None, "every slot is taken");
        assert_eq!(board.add_status_waiter(-1), None, "not a PGPROC number");
    }

    #[test]
    fn a_standby_publishes_its_copy() {
        let board = ReplicationBoard::default();
        board.reset(Role::Follower, 2, -1);
        board.publish_following(true, 65536, 10, 1000, 3, 4, 99);
        let node = board.node();
        assert!(node.connected);
        assert_eq!(
            (node.leader_epoch, node.records_fetched, node.bytes_fetched, node.records_truncated, node.lag_records),
            (65536, 10, 1000, 3, 4)
        );
        assert_eq!(node.last_fetch_ms, Some(99));
    }
}
