//! AlterShareGroupOffsets and DeleteShareGroupOffsets on the share
//! coordinator: what `Admin.alterShareGroupOffsets` and
//! `kafka-share-groups.sh --delete-offsets` change. As Kafka, only an empty
//! group's offsets change (the membership stays locked meanwhile, so no
//! member can join halfway), and the answer waits for the catalog.
//!
//! Altering sets a share-partition's start offset: everything before it is
//! done, nothing is in flight. Deleting unsets every share-partition of a
//! topic: the group reads it again from `share.auto.offset.reset`. Both are
//! ordinary versioned state writes (a deleted one is a tombstone, see
//! [`crate::catalog::UNSET_START_OFFSET`]).

use uuid::Uuid;

use super::service::{lock, SharePartitionKey, ShareService};
use crate::catalog::CatalogFuture;

/// One partition's new start offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StartOffsetChange {
    pub topic_id: Uuid,
    pub partition: i32,
    pub start_offset: i64,
}

impl ShareService {
    /// Sets each share-partition's start offset (a partition the group never
    /// read is started there). The group-level error is GROUP_ID_NOT_FOUND
    /// or NON_EMPTY_GROUP; the future says when the states are stored.
    pub fn alter_start_offsets(
        &self,
        group_id: &str,
        changes: &[StartOffsetChange],
    ) -> Result<Option<CatalogFuture<()>>, i16> {
        self.change_empty_group(group_id, |partitions| {
            let mut records = Vec::with_capacity(changes.len());
            for c in changes {
                let key =
                    SharePartitionKey { group_id: group_id.to_owned(), topic_id: c.topic_id, partition: c.partition };
                let slot = partitions.entry(key.clone()).or_insert_with(super::service::new_slot);
                let mut slot = lock(slot);
                slot.reset_to(c.start_offset);
                records.push(slot.record(&key));
            }
            self.write(records)
        })
    }

    /// Unsets every share-partition of each topic the group has state for.
    /// Per topic: whether it had any (Kafka answers a topic without state
    /// UNKNOWN_TOPIC_OR_PARTITION). The group-level error is
    /// GROUP_ID_NOT_FOUND or NON_EMPTY_GROUP.
    pub fn delete_start_offsets(
        &self,
        group_id: &str,
        topic_ids: &[Uuid],
    ) -> Result<(Vec<bool>, Option<CatalogFuture<()>>), i16> {
        self.change_empty_group(group_id, |partitions| {
            let mut records = Vec::new();
            let mut had_state = vec![false; topic_ids.len()];
            for (key, slot) in partitions.iter().filter(|(k, _)| k.group_id == group_id) {
                let Some(i) = topic_ids.iter().position(|id| *id == key.topic_id) else { continue };
                let mut slot = lock(slot);
                if slot.is_set() {
                    slot.clear();
                    records.push(slot.record(key));
                    had_state[i] = true;
                }
            }
            (had_state, self.write(records))
        })
    }
}
