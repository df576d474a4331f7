//! Replication of topic data to standbys, the extension's side
//! (docs/replication.md): which role this server's broker takes, where a
//! standby finds its leader, the synchronous policy, and noticing a
//! promotion. The copy itself is the broker's (`kafgres_broker::replication`).
//!
//! A primary's broker is the leader: each start records a new leader epoch,
//! its node id and advertised address in `kafgres.leader_epochs`
//! ([`leader`]), a table that physical replication carries to every standby.
//! A standby's broker (the server in hot standby) reads the latest row to
//! find the leader and follows it under its walreceiver's name, so that
//! `synchronous_standby_names` governs topic data as it governs the WAL. At
//! promotion ([`promotion`]) the broker stops following and starts again as
//! the leader, in a new epoch. The views read the broker's replication
//! board in shared memory ([`status`]), or ask the broker for what does not
//! fit there ([`partitions`]).

pub mod leader;
pub mod partitions;
pub mod promotion;
pub mod status;

use std::ffi::CStr;

use kafgres_broker::replication::SyncPolicy;
use pgrx::pg_sys;

/// Whether this server is a standby (in recovery).
pub fn in_recovery() -> bool {
    // SAFETY: RecoveryInProgress reads shared state under its own lock; any
    // process attached to shared memory may call it.
    unsafe { pg_sys::RecoveryInProgress() }
}

/// This standby's name as the primary sees it (`pg_stat_replication`,
/// `synchronous_standby_names`): its walreceiver's application_name.
pub fn standby_name() -> String {
    // SAFETY: both are GUC string variables of this process, read on its
    // main thread; Postgres keeps them valid C strings (or NULL) between
    // configuration reloads, which happen on this thread too.
    let (conninfo, cluster) = unsafe { (c_string(pg_sys::PrimaryConnInfo), c_string(pg_sys::cluster_name)) };
    kafgres_broker::replication::standby_name::standby_name(&conninfo, &cluster)
}

/// `synchronous_standby_names` as this process last loaded it, parsed.
pub fn sync_policy() -> Result<Option<SyncPolicy>, String> {
    // SAFETY: as in `standby_name`.
    let setting = unsafe { c_string(pg_sys::SyncRepStandbyNames) };
    SyncPolicy::parse(&setting).map_err(|e| format!("synchronous_standby_names = '{setting}': {e}"))
}

/// The timeline WAL is written on now (a primary's).
pub fn timeline() -> u32 {
    // SAFETY: reads shared state under its own lock; only meaningful (and
    // only called) once recovery has ended.
    unsafe { pg_sys::GetWALInsertionTimeLine() }
}

/// # Safety
/// `text` must be NULL or point at a NUL-terminated string that stays valid
/// for the call.
unsafe fn c_string(text: *const std::ffi::c_char) -> String {
    if text.is_null() {
        return String::new();
    }
    // SAFETY: per the contract.
    unsafe { CStr::from_ptr(text) }.to_string_lossy().into_owned()
}
