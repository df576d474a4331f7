//! The deadline queue: one entry per key (a group's join, sync or collection
//! timer, or one member's session), ordered by time. Scheduling a key again
//! replaces its entry, as Kafka's coordinator timer does, so a heartbeat is a
//! remove and an insert in two `BTreeMap`s. Memory: one entry per member and
//! at most three per group.

use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(super) struct TimerKey {
    pub group_id: String,
    pub kind: TimerKind,
}

/// `Join` must stay the first variant: `cancel_group` ranges from it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(super) enum TimerKind {
    Join,
    Sync,
    Collect,
    ExpireOffsets,
    Session(String),
    /// A consumer-protocol member that must revoke partitions.
    Revocation(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum TimerAction {
    /// The initial rebalance delay ran out: extend it if members keep coming.
    InitialRebalance { delay_ms: i64, remaining_ms: i64 },
    /// The rebalance timeout ran out: complete the join phase.
    CompleteJoin,
    /// Members that got their JoinGroup answer but never synced are removed.
    ExpirePendingSync { generation_id: i32 },
    /// The member's session expired (or a pending member never rejoined).
    ExpireSession,
    /// Remove the group if it is still empty and holds nothing.
    CollectGroup,
    /// Drop the offsets of an Empty group past `offsets.retention.minutes`.
    ExpireOffsets,
    /// A consumer or streams member's session expired: fence it.
    FenceMember,
    /// A consumer or streams member did not revoke within its rebalance timeout.
    RevocationTimeout { member_epoch: i32 },
}

#[derive(Debug, Default)]
pub(super) struct Timers {
    by_key: BTreeMap<TimerKey, (i64, u64, TimerAction)>,
    queue: BTreeMap<(i64, u64), TimerKey>,
    seq: u64,
}

impl Timers {
    pub fn schedule(&mut self, key: TimerKey, at_ms: i64, action: TimerAction) {
        self.cancel(&key);
        self.seq += 1;
        self.queue.insert((at_ms, self.seq), key.clone());
        self.by_key.insert(key, (at_ms, self.seq, action));
    }

    pub fn cancel(&mut self, key: &TimerKey) {
        if let Some((at_ms, seq, _)) = self.by_key.remove(key) {
            self.queue.remove(&(at_ms, seq));
        }
    }

    /// Cancels every timer of a group (it is being removed).
    pub fn cancel_group(&mut self, group_id: &str) {
        let start = TimerKey { group_id: group_id.to_string(), kind: TimerKind::Join };
        let keys: Vec<TimerKey> =
            self.by_key.range(start..).take_while(|(k, _)| k.group_id == group_id).map(|(k, _)| k.clone()).collect();
        for key in keys {
            self.cancel(&key);
        }
    }

    pub fn contains(&self, key: &TimerKey) -> bool {
        self.by_key.contains_key(key)
    }

    pub fn next_deadline(&self) -> Option<i64> {
        self.queue.keys().next().map(|&(at_ms, _)| at_ms)
    }

    /// The sequence number of the newest entry: entries scheduled after this
    /// value was read are not popped by `pop_due(.., limit)`.
    pub fn last_seq(&self) -> u64 {
        self.seq
    }

    /// Removes and returns the earliest entry due at `now_ms` that was
    /// scheduled no later than `seq_limit`.
    pub fn pop_due(&mut self, now_ms: i64, seq_limit: u64) -> Option<(TimerKey, TimerAction)> {
        let (&(at_ms, seq), _) = self.queue.range(..=(now_ms, u64::MAX)).find(|(&(_, seq), _)| seq <= seq_limit)?;
        let key = self.queue.remove(&(at_ms, seq))?;
        let (_, _, action) = self.by_key.remove(&key)?;
        Some((key, action))
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        debug_assert_eq!(self.by_key.len(), self.queue.len());
        self.by_key.len()
    }
}
