//! The physical replication slot that keeps the WAL the bridge has not
//! applied yet.
//!
//! A physical slot retains WAL from its `restart_lsn` and nothing else: no
//! catalog rows, no decoding state. The bridge sets it to its checkpoint's
//! restart point after each stored checkpoint, so the WAL it retains is what
//! it still needs: the transactions open at its last round, and what it has
//! not read. It never holds the slot acquired between updates: the
//! checkpointer, invalidating a slot that passed `max_slot_wal_keep_size`,
//! terminates the process holding it, and the bridge must not be that process.
//!
//! A standby's broker worker keeps a slot of the same name on the standby,
//! following the checkpoint that replication brings it, so that after a
//! promotion the bridge there finds the WAL of the sends the old primary had
//! not applied.

use std::ffi::CString;

use pgrx::pg_sys;
use pgrx::PgTryBuilder;

/// The slot's name (one per cluster: the bridge serves one database).
pub const SLOT_NAME: &str = "kafgres_sql_bridge";
/// The logical slot of releases whose broker decoded the WAL itself; dropped
/// once the bridge has taken over its position.
pub const LEGACY_SLOT_NAME: &str = "kafgres";

/// A slot as found in shared memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlotInfo {
    /// `None` when the slot was invalidated (its WAL is gone).
    pub restart_lsn: Option<u64>,
    pub physical: bool,
    pub active_pid: i32,
}

fn name(slot: &str) -> CString {
    CString::new(slot).expect("slot names have no NUL")
}

/// Runs `body`, turning a Postgres ERROR into `Err(message)` and releasing
/// the LWLocks and the slot the failed body held. Call outside a transaction.
fn guarded<T>(what: &str, body: impl FnOnce() -> T) -> Result<T, String> {
    PgTryBuilder::new(std::panic::AssertUnwindSafe(|| Ok(body())))
        .catch_others(|caught| {
            // SAFETY: on the bridge's main thread, outside a transaction (the
            // callers' contract), so no transaction abort will clean up after
            // the ERROR: this does what Postgres's error recovery does for such
            // a process (the checkpointer's, the walsender's). An ERROR can
            // leave LWLocks held: ReplicationSlotCreate raises "all
            // replication slots are in use" holding
            // ReplicationSlotAllocationLock, and "already exists" holding
            // ReplicationSlotControlLock as well. Kept, they would stall slot
            // operations across the cluster and deadlock this process on its
            // next try, so they are released first (no caller holds an LWLock
            // of its own across this). Then the slot, if the body had acquired
            // it, is still ours to release.
            unsafe {
                pg_sys::LWLockReleaseAll();
                if !pg_sys::MyReplicationSlot.is_null() {
                    pg_sys::ReplicationSlotRelease();
                }
            }
            use pgrx::pg_sys::panic::CaughtError;
            let message = match caught {
                CaughtError::PostgresError(r) | CaughtError::ErrorReport(r) => r.message().to_owned(),
                CaughtError::RustPanic { ereport, .. } => ereport.message().to_owned(),
            };
            Err(format!("{what}: {message}"))
        })
        .execute()
}

/// The slot named `slot`, if it exists.
pub fn find(slot: &str) -> Option<SlotInfo> {
    let slot_name = name(slot);
    // SAFETY: SearchNamedReplicationSlot takes the control lock itself
    // (need_lock = true) and returns NULL or a pointer into the slot array in
    // shared memory, which lives as long as the server (slots are reused,
    // never freed).
    let found = unsafe { pg_sys::SearchNamedReplicationSlot(slot_name.as_ptr(), true) };
    if found.is_null() {
        return None;
    }
    let (mut restart_lsn, mut database, mut active_pid) = (0, pg_sys::InvalidOid, 0);
    // SAFETY: `found` points at a slot in shared memory (above). Its owner
    // changes restart_lsn and active_pid under the slot's spin lock, so they
    // are read under it too, as pg_get_replication_slots does; the slot is
    // reached through the raw pointer only (no Rust reference to memory other
    // processes write). A slot dropped and reused since the search reads as
    // the newer slot: the caller treats what it finds as a snapshot anyway.
    unsafe {
        with_slot_mutex(found, || {
            restart_lsn = (*found).data.restart_lsn;
            database = (*found).data.database;
            active_pid = (*found).active_pid;
        });
    }
    Some(SlotInfo {
        restart_lsn: (restart_lsn != pg_sys::InvalidXLogRecPtr as u64).then_some(restart_lsn),
        physical: database == pg_sys::InvalidOid,
        active_pid,
    })
}

/// Whether the WAL at `lsn` is still on disk.
pub fn wal_available(lsn: u64) -> bool {
    lsn >= oldest_available_wal()
}

/// The start of the oldest WAL segment on disk: past the last one removed,
/// and not before the first one there. A server made by pg_basebackup never
/// had the segments before its backup's start, and none counts as removed.
pub fn oldest_available_wal() -> u64 {
    // SAFETY: XLogGetLastRemovedSegno reads a value under its own spin lock;
    // wal_segment_size is fixed at startup.
    let (after_removed, segment_size) =
        unsafe { (pg_sys::XLogGetLastRemovedSegno() + 1, pg_sys::wal_segment_size as u64) };
    let first_on_disk = first_segment_on_disk(segment_size).unwrap_or(0);
    after_removed.max(first_on_disk) * segment_size
}

/// The lowest segment number of the WAL files in `pg_wal` (any timeline).
fn first_segment_on_disk(segment_size: u64) -> Option<u64> {
    let segments_per_id = 0x1_0000_0000u64 / segment_size.max(1);
    // A backend's and a worker's working directory is the data directory.
    std::fs::read_dir("pg_wal")
        .ok()?
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().into_string().ok()?;
            if name.len() != 24 || !name.bytes().all(|b| b.is_ascii_hexdigit()) {
                return None;
            }
            let log = u64::from_str_radix(&name[8..16], 16).ok()?;
            let seg = u64::from_str_radix(&name[16..24], 16).ok()?;
            Some(log * segments_per_id + seg)
        })
        .min()
}

/// Creates the slot, retaining WAL from `restart_lsn`, or from the oldest
/// WAL still there when that is gone (returned). Call outside a transaction.
pub fn create(slot: &str, restart_lsn: u64) -> Result<u64, String> {
    let slot_name = name(slot);
    guarded(&format!("creating replication slot \"{slot}\""), || {
        // SAFETY: the ReplicationSlotCreate/Save/Release sequence is the one
        // pg_create_physical_replication_slot runs; the slot is ours (acquired)
        // between Create and Release, so setting its restart point is allowed.
        unsafe {
            pg_sys::ReplicationSlotCreate(
                slot_name.as_ptr(),
                false,
                pg_sys::ReplicationSlotPersistency::RS_PERSISTENT,
                false,
            );
            let retained = set_restart_lsn_of_mine(restart_lsn.max(oldest_available_wal()));
            pg_sys::ReplicationSlotMarkDirty();
            pg_sys::ReplicationSlotSave();
            pg_sys::ReplicationSlotRelease();
            retained
        }
    })
}

/// Moves the slot's restart point forward to `restart_lsn` (never back).
/// Fails if the slot is missing or another process holds it.
pub fn advance(slot: &str, restart_lsn: u64) -> Result<(), String> {
    let slot_name = name(slot);
    guarded(&format!("advancing replication slot \"{slot}\""), || {
        // SAFETY: acquire (nowait), update, release: the sequence
        // pg_replication_slot_advance runs for a physical slot.
        unsafe {
            pg_sys::ReplicationSlotAcquire(slot_name.as_ptr(), true);
            let current = (*pg_sys::MyReplicationSlot).data.restart_lsn;
            if current != pg_sys::InvalidXLogRecPtr as u64 && restart_lsn > current {
                set_restart_lsn_of_mine(restart_lsn);
                pg_sys::ReplicationSlotMarkDirty();
            }
            pg_sys::ReplicationSlotRelease();
        }
    })
}

/// Drops a slot nobody holds. Call outside a transaction.
pub fn drop_slot(slot: &str) -> Result<(), String> {
    let slot_name = name(slot);
    // SAFETY: ReplicationSlotDrop acquires (nowait) and drops; an ERROR (in
    // use) is caught and the slot left alone.
    guarded(&format!("dropping replication slot \"{slot}\""), || unsafe {
        pg_sys::ReplicationSlotDrop(slot_name.as_ptr(), true)
    })
}

/// Sets the acquired slot's restart point and lets the server recompute the
/// WAL every slot needs; returns the restart point set.
///
/// # Safety
/// The calling process must have acquired the slot (`MyReplicationSlot`).
unsafe fn set_restart_lsn_of_mine(restart_lsn: u64) -> u64 {
    // SAFETY: per the contract the slot is ours; the spin lock is taken as
    // Postgres's SpinLockAcquire does (test-and-set on slock_t).
    unsafe {
        let slot = pg_sys::MyReplicationSlot;
        with_slot_mutex(slot, || (*slot).data.restart_lsn = restart_lsn);
        pg_sys::ReplicationSlotsComputeRequiredLSN();
    }
    restart_lsn
}

/// Runs `f` holding a slot's spin lock (`slot->mutex`), which readers of its
/// restart point take (ReplicationSlotsComputeRequiredLSN, pg_replication_slots).
///
/// # Safety
/// `slot` must point at a slot in shared memory.
unsafe fn with_slot_mutex(slot: *mut pg_sys::ReplicationSlot, f: impl FnOnce()) {
    // slock_t is one byte on the platforms Postgres 15 supports with
    // test-and-set spin locks (x86-64: `lock xchgb`; the generic gcc
    // implementation: __sync_lock_test_and_set on a char); 0 is free.
    const _: () = assert!(std::mem::size_of::<pg_sys::slock_t>() == 1);
    // SAFETY: the byte lives in shared memory as long as the server; an
    // atomic swap is the same test-and-set s_lock.h performs, and the release
    // store is its S_UNLOCK.
    unsafe {
        let lock = std::sync::atomic::AtomicU8::from_ptr(std::ptr::addr_of_mut!((*slot).mutex).cast::<u8>());
        while lock.swap(1, std::sync::atomic::Ordering::Acquire) != 0 {
            std::hint::spin_loop();
        }
        f();
        lock.store(0, std::sync::atomic::Ordering::Release);
    }
}
