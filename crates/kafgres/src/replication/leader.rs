//! `kafgres.leader_epochs`: one row per start of a primary's broker.
//!
//! The epoch is what KIP-101 fences with: every batch a leader appends
//! carries it, and a follower cuts what its own log holds past the point
//! where the leader's history of that epoch ends. So an epoch must never be
//! used twice for different records. A restart of the same primary takes the
//! table's latest epoch + 1. A promoted standby may not have received the
//! latest rows (an asynchronous standby, or a row the old primary wrote with
//! `synchronous_commit = local` just before it died), so its epoch also
//! starts at its timeline times 2^16: a promotion always moves to a new
//! timeline, above every epoch the old one used (fewer than 65,536 starts
//! per timeline). Producer ids move the same way (`producer_id_base`).

use pgrx::spi::Spi;

/// Where clients and followers find the leader.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderRow {
    pub epoch: i32,
    pub node_id: i32,
    pub host: String,
    pub port: u16,
    /// Its `advertised.listeners` (`PROTOCOL://host:port,…`).
    pub listeners: String,
}

/// The first epoch of timeline `timeline`.
pub fn timeline_base(timeline: u32) -> i32 {
    let base = (u64::from(timeline.max(1)) - 1) << 16;
    i32::try_from(base).unwrap_or(i32::MAX / 2)
}

/// Records this broker as the leader, in a new epoch, with its primary
/// listener and all its advertised listeners; returns the epoch. Call
/// inside a transaction, on a primary.
pub fn begin_epoch(node_id: i32, host: &str, port: u16, listeners: &str, timeline: u32) -> Result<i32, String> {
    // Not waiting for a synchronous standby: the standby's broker needs this
    // broker running to catch up, and the timeline base above covers a row
    // that never reaches it.
    Spi::run("SET LOCAL synchronous_commit = local").map_err(|e| format!("setting synchronous_commit: {e}"))?;
    Spi::run("LOCK TABLE kafgres.leader_epochs IN EXCLUSIVE MODE")
        .map_err(|e| format!("locking kafgres.leader_epochs: {e}"))?;
    let epoch = Spi::get_one_with_args::<i32>(
        "INSERT INTO kafgres.leader_epochs (epoch, node_id, host, port, timeline, listeners)
         SELECT greatest(coalesce(max(epoch) + 1, 0), $1), $2, $3, $4, $5, $6 FROM kafgres.leader_epochs
         RETURNING epoch",
        &[
            timeline_base(timeline).into(),
            node_id.into(),
            host.into(),
            i32::from(port).into(),
            i64::from(timeline).into(),
            listeners.into(),
        ],
    )
    .map_err(|e| format!("recording the leader epoch in kafgres.leader_epochs: {e}"))?;
    let epoch = epoch.ok_or_else(|| "kafgres.leader_epochs: the insert returned no epoch".to_owned())?;
    // Producer ids are reserved in blocks (`kafgres.cluster`); a block the
    // old primary reserved may never have reached an asynchronous standby,
    // and two producers sharing an id would take each other's sequence
    // numbers for duplicates. Each timeline starts its ids far above the
    // previous one's (2^44 apart: ids are 63 bits).
    Spi::run_with_args(
        "UPDATE kafgres.cluster SET next_producer_id = greatest(next_producer_id, $1)",
        &[producer_id_base(timeline).into()],
    )
    .map_err(|e| format!("moving kafgres.cluster.next_producer_id to this timeline's: {e}"))?;
    Ok(epoch)
}

/// The first producer id of timeline `timeline`.
pub fn producer_id_base(timeline: u32) -> i64 {
    let base = (u128::from(timeline.max(1)) - 1) << 44;
    i64::try_from(base).unwrap_or(i64::MAX / 2)
}

/// The latest leader recorded (as replicated to a standby).
pub fn current() -> Result<Option<LeaderRow>, String> {
    Spi::connect(|client| {
        let rows = client.select(
            "SELECT epoch, node_id, host, port, listeners FROM kafgres.leader_epochs ORDER BY epoch DESC LIMIT 1",
            Some(1),
            &[],
        )?;
        let mut found = None;
        for row in rows {
            if let (Some(epoch), Some(node_id), Some(host), Some(port)) =
                (row.get::<i32>(1)?, row.get::<i32>(2)?, row.get::<String>(3)?, row.get::<i32>(4)?)
            {
                let listeners = row.get::<String>(5)?.unwrap_or_default();
                found = Some(LeaderRow { epoch, node_id, host, port: u16::try_from(port).unwrap_or(0), listeners });
            }
        }
        Ok::<_, pgrx::spi::Error>(found)
    })
    .map_err(|e| format!("reading kafgres.leader_epochs: {e}"))
}
