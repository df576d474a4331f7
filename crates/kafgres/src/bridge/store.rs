//! The bridge's checkpoint in Postgres: `kafgres.sql_bridge` (one row: the
//! WAL applied and the restart point, the producer id and epoch) and
//! `kafgres.sql_bridge_sequences` (the next sequence per partition), and the
//! gaps it reports in `kafgres.sql_bridge_gaps`.
//!
//! Tables, not a file: a standby receives them with the rest of the catalog,
//! so the bridge of a promoted standby continues exactly where the primary's
//! stopped. A round's checkpoint is committed with `synchronous_commit =
//! local`: it must be durable here before the slot lets its WAL go, but a
//! standby missing the newest one only replays more, which the applier
//! recognises.

use std::collections::BTreeMap;

use kafgres_bridge::Checkpoint;
use pgrx::spi::Spi;

use crate::catalog_sql::{read_one, run_in_transaction};

/// What the table holds.
pub struct Stored {
    pub checkpoint: Checkpoint,
    /// The row was written by the upgrade from a release whose applier kept
    /// its checkpoint in a file: import that file first.
    pub import_legacy_file: bool,
}

pub fn parse_lsn(text: &str) -> Result<u64, String> {
    let (high, low) = text.split_once('/').ok_or_else(|| format!("{text:?} is not an LSN"))?;
    let high = u64::from_str_radix(high, 16).map_err(|_| format!("{text:?} is not an LSN"))?;
    let low = u64::from_str_radix(low, 16).map_err(|_| format!("{text:?} is not an LSN"))?;
    Ok(high << 32 | low)
}

pub fn lsn_text(lsn: u64) -> String {
    super::wal::lsn_text(lsn)
}

/// Whether the bridge's tables exist (the schema is at least this release's).
pub fn schema_ready() -> Result<bool, String> {
    run_in_transaction(|| {
        read_one::<bool>("SELECT to_regclass('kafgres.sql_bridge') IS NOT NULL")
            .map(|v| v.unwrap_or(false))
            .map_err(|e| format!("checking for kafgres.sql_bridge: {e}"))
    })
}

pub fn load() -> Result<Stored, String> {
    run_in_transaction(|| {
        // Read-only (the standby's broker reads it too: `crate::catalog_sql::read_one`).
        let row = Spi::connect(|client| {
            client
                .select(
                    "SELECT applied_lsn::text, restart_lsn::text, producer_id FROM kafgres.sql_bridge",
                    Some(1),
                    &[],
                )?
                .first()
                .get_three::<String, String, i64>()
        });
        let (applied, restart, producer_id) = match row {
            Ok(row) => row,
            Err(pgrx::spi::SpiError::InvalidPosition) => {
                return Err("kafgres.sql_bridge is empty; recreate the extension's row \
                            (INSERT INTO kafgres.sql_bridge (applied_lsn, restart_lsn) \
                            VALUES (pg_current_wal_insert_lsn(), pg_current_wal_insert_lsn()))"
                    .into())
            }
            Err(e) => return Err(format!("reading kafgres.sql_bridge: {e}")),
        };
        let epoch = read_one::<i16>("SELECT producer_epoch FROM kafgres.sql_bridge")
            .map_err(|e| format!("reading kafgres.sql_bridge: {e}"))?
            .unwrap_or(0);
        let restart_lsn = parse_lsn(restart.as_deref().unwrap_or(""))?;
        let mut next_sequence = BTreeMap::new();
        Spi::connect(|client| {
            let rows =
                client.select("SELECT topic, partition, next_sequence FROM kafgres.sql_bridge_sequences", None, &[])?;
            for row in rows {
                let (Some(topic), Some(partition), Some(next)) =
                    (row.get::<String>(1)?, row.get::<i32>(2)?, row.get::<i32>(3)?)
                else {
                    continue;
                };
                next_sequence.insert((topic, partition), next);
            }
            Ok::<_, pgrx::spi::Error>(())
        })
        .map_err(|e| format!("reading kafgres.sql_bridge_sequences: {e}"))?;
        let import_legacy_file = applied.is_none();
        let applied_lsn = match applied.as_deref() {
            Some(text) => parse_lsn(text)?,
            None => restart_lsn,
        };
        Ok(Stored {
            checkpoint: Checkpoint {
                applied_lsn,
                restart_lsn,
                producer_id: producer_id.unwrap_or(-1),
                producer_epoch: epoch,
                next_sequence,
            },
            import_legacy_file,
        })
    })
}

/// Stores the checkpoint: the row, and the sequences of `changed` partitions
/// (all of them when `None`), in one transaction.
pub fn store(checkpoint: &Checkpoint, changed: Option<&[(String, i32)]>) -> Result<(), String> {
    run_in_transaction(|| {
        Spi::run("SET LOCAL synchronous_commit TO local").map_err(|e| format!("{e}"))?;
        Spi::run_with_args(
            "UPDATE kafgres.sql_bridge SET applied_lsn = $1::pg_lsn, restart_lsn = $2::pg_lsn, \
             producer_id = $3, producer_epoch = $4::int2, updated_at = now()",
            &[
                lsn_text(checkpoint.applied_lsn).into(),
                lsn_text(checkpoint.restart_lsn).into(),
                checkpoint.producer_id.into(),
                i32::from(checkpoint.producer_epoch).into(),
            ],
        )
        .map_err(|e| format!("storing the SQL bridge's checkpoint: {e}"))?;
        let rows: Vec<(&(String, i32), &i32)> = match changed {
            None => {
                Spi::run("DELETE FROM kafgres.sql_bridge_sequences").map_err(|e| format!("{e}"))?;
                checkpoint.next_sequence.iter().collect()
            }
            Some(keys) => keys.iter().filter_map(|k| checkpoint.next_sequence.get_key_value(k)).collect(),
        };
        if rows.is_empty() {
            return Ok(());
        }
        let topics: Vec<String> = rows.iter().map(|((t, _), _)| t.clone()).collect();
        let partitions: Vec<i32> = rows.iter().map(|((_, p), _)| *p).collect();
        let sequences: Vec<i32> = rows.iter().map(|(_, s)| **s).collect();
        Spi::run_with_args(
            "INSERT INTO kafgres.sql_bridge_sequences AS s (topic, partition, next_sequence) \
             SELECT * FROM unnest($1::text[], $2::int4[], $3::int4[]) \
             ON CONFLICT (topic, partition) DO UPDATE SET next_sequence = excluded.next_sequence",
            &[topics.into(), partitions.into(), sequences.into()],
        )
        .map_err(|e| format!("storing the SQL bridge's sequences: {e}"))
    })
}

/// Records that committed sends in `from..to` (commit LSNs) may be missing,
/// and why; `xid` names one transaction when the gap is one transaction.
pub fn record_gap(from: u64, to: u64, xid: Option<u32>, reason: &str) -> Result<(), String> {
    run_in_transaction(|| {
        Spi::run_with_args(
            "INSERT INTO kafgres.sql_bridge_gaps (from_lsn, to_lsn, xid, reason) \
             VALUES ($1::pg_lsn, $2::pg_lsn, $3::bigint, $4)",
            &[lsn_text(from).into(), lsn_text(to).into(), xid.map(i64::from).into(), reason.to_owned().into()],
        )
        .map_err(|e| format!("recording a gap of the SQL bridge: {e}"))
    })
}
