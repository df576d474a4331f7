//! The control plane's part of producing from SQL: decode committed
//! transactions from the slot, hand them to the applier on the data plane,
//! and confirm the slot once the applier reports them durable in the log.
//!
//! One round is in flight at a time. Its completion writes the eventfd, which
//! wakes the worker; a committing sender sets the latch. Either wake-up polls
//! the pipeline, so records committed during a round are decoded right after
//! it. A failed round (disk error, say) keeps its transactions and is retried
//! after [`RETRY_DELAY`].
//!
//! The slot is confirmed up to where decoding reached, not only to the last
//! transaction that sent something: otherwise a database that stops sending
//! would pin all its WAL from then on. For the same reason an idle worker
//! decodes at least every [`SLOT_ADVANCE_INTERVAL`]: housekeeping that bounds
//! the WAL the slot retains, never something a send waits for (sends wake the
//! worker at commit).

use std::sync::mpsc::{Receiver, TryRecvError};
use std::sync::Arc;
use std::time::Duration;

use kafgres_broker::sql_bridge::apply::ApplyReport;
use kafgres_broker::sql_bridge::message::group_committed;
use kafgres_broker::sql_bridge::{ApplyError, CommittedTxn, SqlApplier};
use kafgres_broker::BrokerContext;
use pgrx::prelude::*;

use crate::control::EventFd;
use crate::decoding::decoder::{allow_own_output_plugin, ensure_slot, lsn_text, wal_level_is_logical, WalDecoder};

/// Decoded output gathered before a round is handed over.
const ROUND_OUTPUT_BYTES_MAX: usize = 16 << 20;
pub const RETRY_DELAY: Duration = Duration::from_secs(1);
pub const SLOT_ADVANCE_INTERVAL: Duration = Duration::from_secs(10);
/// How far the slot's restart point may trail its confirmed point before the
/// worker logs a running-transactions record to let it move.
const RESTART_LAG_BYTES_MAX: u64 = 16 << 20;
/// At most one such record per this interval (a few hundred bytes of WAL and
/// one scan of the proc array each).
const RUNNING_XACTS_INTERVAL: Duration = Duration::from_millis(200);

type RoundResult = (SqlApplier, Vec<CommittedTxn>, Result<ApplyReport, ApplyError>);

/// Transactions to apply and the WAL position decoding had reached.
struct Round {
    txns: Vec<CommittedTxn>,
    decoded_to: u64,
}

pub struct SqlPipeline {
    decoder: WalDecoder,
    applier: Option<SqlApplier>,
    in_flight: Option<(Receiver<RoundResult>, u64)>,
    /// A failed round, applied again before anything new.
    retry: Option<Round>,
    last_running_xacts: std::time::Instant,
}

impl SqlPipeline {
    /// Creates the slot if needed and opens the decoder and the applier.
    /// `None` (with a warning saying why) when SQL sends cannot work here:
    /// the Kafka side of the broker runs regardless.
    pub fn start(log_dir: &std::path::Path) -> Option<SqlPipeline> {
        if !wal_level_is_logical() {
            warning!(
                "kafgres: wal_level is not logical, so kafgres.send() is unavailable; \
                 set wal_level = logical and restart PostgreSQL"
            );
            return None;
        }
        allow_own_output_plugin();
        if let Err(e) = ensure_slot() {
            warning!("kafgres: SQL sends are unavailable: {e}");
            return None;
        }
        let applier = match SqlApplier::open(log_dir.to_path_buf()) {
            Ok(a) => a,
            Err(e) => {
                warning!("kafgres: SQL sends are unavailable: {e}");
                return None;
            }
        };
        let decoder = WalDecoder::start();
        if applier.applied_lsn() > decoder.confirmed() {
            log!(
                "kafgres: the slot is confirmed to {}, the log holds SQL sends to {}: replaying the difference",
                lsn_text(decoder.confirmed()),
                lsn_text(applier.applied_lsn())
            );
        }
        Some(SqlPipeline {
            decoder,
            applier: Some(applier),
            in_flight: None,
            retry: None,
            last_running_xacts: std::time::Instant::now(),
        })
    }

    /// How long the worker may sleep before polling again.
    pub fn wait_timeout(&self) -> Duration {
        if self.retry.is_some() && self.in_flight.is_none() {
            RETRY_DELAY
        } else {
            SLOT_ADVANCE_INTERVAL
        }
    }

    /// Collects a finished round, then starts the next one if anything is
    /// committed and not yet applied. Never blocks.
    pub fn poll(&mut self, runtime: &tokio::runtime::Runtime, ctx: &Arc<BrokerContext>, waker: &Arc<EventFd>) {
        if let Some((done, decoded_to)) = &self.in_flight {
            let decoded_to = *decoded_to;
            match done.try_recv() {
                Ok((applier, txns, result)) => {
                    self.in_flight = None;
                    self.applier = Some(applier);
                    match result {
                        Ok(report) => {
                            self.decoder.confirm(decoded_to.max(report.applied_lsn));
                            self.let_restart_point_move();
                            if report.records_dropped > 0 || report.batches_already_present > 0 {
                                log!(
                                    "kafgres: applied SQL sends to {}: {} batch(es) were already in the log, \
                                     {} record(s) dropped (topic gone)",
                                    lsn_text(report.applied_lsn),
                                    report.batches_already_present,
                                    report.records_dropped
                                );
                            }
                        }
                        Err(e) => {
                            warning!("kafgres: applying records sent from SQL failed, retrying: {e}");
                            self.retry = Some(Round { txns, decoded_to });
                            return;
                        }
                    }
                }
                Err(TryRecvError::Empty) => return,
                Err(TryRecvError::Disconnected) => error!("kafgres: the SQL applier task stopped"),
            }
        }
        let Round { txns, decoded_to } = match self.retry.take() {
            Some(round) => round,
            None => self.decode(),
        };
        if txns.is_empty() {
            // Nothing to apply up to here: let the slot release that WAL.
            if decoded_to > self.decoder.confirmed() {
                self.decoder.confirm(decoded_to);
                self.let_restart_point_move();
            }
            return;
        }
        let Some(mut applier) = self.applier.take() else { return };
        let (done, receive) = std::sync::mpsc::sync_channel(1);
        let ctx = Arc::clone(ctx);
        let waker = Arc::clone(waker);
        runtime.spawn(async move {
            let result = applier.apply(&ctx, &txns).await;
            let _ = done.send((applier, txns, result));
            waker.wake();
        });
        self.in_flight = Some((receive, decoded_to));
    }

    /// The slot's restart point (what WAL it retains) moves only when the
    /// decoder meets a running-transactions record, which Postgres logs every
    /// 15 seconds and at checkpoints; under steady sends that let the slot
    /// retain 30 to 50 seconds of WAL. When the restart point trails by more
    /// than [`RESTART_LAG_BYTES_MAX`], the worker logs one itself (at most
    /// every [`RUNNING_XACTS_INTERVAL`]), as the bgwriter would.
    fn let_restart_point_move(&mut self) {
        if self.last_running_xacts.elapsed() < RUNNING_XACTS_INTERVAL {
            return;
        }
        if self.decoder.confirmed().saturating_sub(self.decoder.restart_point()) < RESTART_LAG_BYTES_MAX {
            return;
        }
        unsafe { pgrx::pg_sys::LogStandbySnapshot() };
        self.last_running_xacts = std::time::Instant::now();
    }

    fn decode(&mut self) -> Round {
        let decoded = self.decoder.decode_available(ROUND_OUTPUT_BYTES_MAX);
        let decoded_to = self.decoder.position();
        let (txns, errors) = group_committed(decoded.outputs.iter().map(Vec::as_slice));
        for (lsn, e) in errors {
            warning!("kafgres: skipping an undecodable message of the transaction committed at {}: {e}", lsn_text(lsn));
        }
        Round { txns, decoded_to }
    }
}
